// Execution backends: where the engine's matrices live and what runs the kernels on them.
// The CPU backend (OpenMP, kernels/reference) is here; the CUDA backend implements the same
// interface with device memory, cuSPARSE/cuBLAS and the custom kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/feature_view.hpp"
#include "halo/core/kernel_metadata.hpp"
#include "halo/core/memory_report.hpp"
#include "halo/core/model.hpp"
#include "halo/kernels_host/aes_options.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo {

/// A dense row-major matrix in a backend's memory (host or device); movable, owning.
class Matrix {
public:
    Matrix() = default;
    Matrix(std::shared_ptr<float> storage, std::int64_t rows, std::int64_t cols)
        : storage_(std::move(storage)), rows_(rows), cols_(cols)
    {
    }

    float* data() const noexcept { return storage_.get(); }
    std::int64_t rows() const noexcept { return rows_; }
    std::int64_t cols() const noexcept { return cols_; }
    DenseView<float> view() const noexcept { return {storage_.get(), rows_, cols_, cols_}; }
    /// Rows [begin, end) as a view (the matrix stays the owner).
    DenseView<float> rows_view(std::int64_t begin, std::int64_t end) const noexcept
    {
        return {storage_.get() + begin * cols_, end - begin, cols_, cols_};
    }

private:
    std::shared_ptr<float> storage_;
    std::int64_t rows_ = 0;
    std::int64_t cols_ = 0;
};

/// A prepared sparse operator (plan / execute): preprocessing happens once when the plan is made,
/// run() many times. y rows outside `rows` are untouched.
class SpmmPlan {
public:
    virtual ~SpmmPlan() = default;
    virtual void run(DenseView<const float> x, DenseView<float> y, RowRange rows) = 0;
    /// Whether run_add() is implemented: the split overlap then adds the halo columns' sums to y
    /// in place rather than through a buffer of its own and a second pass (StepContext).
    virtual bool adds_in_place() const { return false; }
    /// y[rows] += A[rows] * x, each element of y read and written once: the row sums exactly as
    /// run() forms them, then one addition (MergePath's rows that several segments share add
    /// their parts atomically, in any order, as its run() does). Rows outside `rows` untouched.
    /// Only where adds_in_place(); throws halo::LogicError elsewhere.
    virtual void run_add(DenseView<const float> x, DenseView<float> y, RowRange rows);
    virtual std::string algorithm() const = 0;
    /// Whether run_features() takes X of `type`: fp32 always; fp16 / bf16 where the plan gathers
    /// 16-bit rows (the CUDA backend's kernels that the registry says read them, asked for
    /// through SpmmPlanHints::activations; every CPU plan, which widens them exactly).
    virtual bool reads_features(FeatureType type) const { return type == FeatureType::fp32; }
    /// run() with X of any type that reads_features() takes: the products and sums in fp32, as
    /// run() on X's values widened to fp32. The default runs fp32 X and throws
    /// halo::LogicError for another type.
    virtual void run_features(FeatureView x, DenseView<float> y, RowRange rows);
    /// Whether run() computes the exact product; false for a sampling approximation (AES),
    /// whose result depends on the whole row it samples from, so that the engine never splits
    /// its operator into column blocks (OverlapMode::split).
    virtual bool exact() const { return true; }
    /// What the plan decided at run time (an autotuned plan's choices), one line per decision;
    /// empty for plans that decide nothing.
    virtual std::string report() const { return {}; }
    /// Decisions made in this process that are worth keeping in the dataset (the autotuner's
    /// new choices) as kernel metadata of the plan's operator; empty when there are none.
    virtual std::vector<KernelMetadata> tuning_metadata() const { return {}; }
    /// Wall time this plan spent timing kernels to choose among them (an autotuned plan's
    /// trials); 0 for plans that decide nothing.
    virtual double tuning_seconds() const { return 0.0; }
    /// The backend memory the plan holds (its operator, metadata, workspaces, tuning scratch);
    /// a report with total() == 0 means the plan does not say, and the engine counts its operator
    /// as a CSR with values (Engine::memory_report).
    virtual MemoryReport memory() const { return {}; }
    /// Frees what the plan built to choose among and did not keep (an autotuned plan's
    /// candidates that no shape chose), once the shapes it runs are chosen (the engine: after its
    /// first run); what a later new shape needs is built again. Returns how many pieces it freed.
    virtual std::size_t release_unkept() { return 0; }
};

/// What the engine knows about an operator beyond its matrix, for plans that can use it.
struct SpmmPlanHints {
    /// The operator's pattern name in the dataset's kernel metadata (kernel_operator_adjacency or
    /// kernel_operator_gcn).
    std::string op;
    /// The row ranges run() will be asked for (the interior and the boundary rows).
    std::vector<RowRange> ranges;
    /// This operator's kernel metadata from the dataset (any kernel; a plan takes what it uses).
    std::vector<KernelMetadata> stored;
    /// The element type the engine stores activations in (EngineOptions::activations): a
    /// 16-bit type asks the plan to read it too (SpmmPlan::run_features), where its kernels can.
    FeatureType activations = FeatureType::fp32;
};

/// MaxK-GNN's aggregation (paper 000; halo/kernels_host/maxk.hpp) as the engine drives it: the plan
/// owns a CBSR of the operator's num_cols rows (owned rows, then halo rows) with k entries of `dim`
/// per row. topk() fills owned rows from the dense embedding; across ranks the engine packs the
/// rows it sends into exchange records, exchanges them like feature rows and unpacks the halo rows;
/// then aggregate() computes out = A * S (the SSD operator) over a row range.
///
/// Exchange record of one row (record_words() 4-byte words): k float values, then k int16 column
/// indices, then zero padding to a whole word: 6k bytes instead of 4 dim.
class MaxkPlan {
public:
    virtual ~MaxkPlan() = default;
    /// Top-k of the rows of x (device/host per backend, x.rows <= CBSR rows, x.cols == dim) into
    /// CBSR rows [0, x.rows), with the tie rule of halo/kernels_host/maxk.hpp.
    virtual void topk(DenseView<const float> x) = 0;
    /// Writes CBSR rows `rows` as records into the same rows of `records` (cols == record_words()).
    virtual void pack(RowRange rows, DenseView<float> records) = 0;
    /// Reads CBSR rows `rows` back from the same rows of `records`. Throws halo::InputError (on
    /// the CPU; the device checks what it can) for indices outside [0, dim).
    virtual void unpack(DenseView<const float> records, RowRange rows) = 0;
    /// out[rows] = A[rows] * S (out.cols == dim); other rows untouched.
    virtual void aggregate(DenseView<float> out, RowRange rows) = 0;
    virtual std::string algorithm() const = 0;

    static constexpr std::int64_t record_words(std::int64_t k) { return maxk_record_words(k); }
};

/// Sparse attention over a pattern (halo/kernels_host/attention.hpp semantics; rows without a
/// nonzero give zeros): dot-product scores for AGNN and the graph transformer, additive ones for
/// GAT.
class AttentionPlan {
public:
    virtual ~AttentionPlan() = default;
    /// out[rows] = softmax_row(scale * q k^T on the pattern) v; q has the operator's rows, k and
    /// v its columns; any leading dimensions.
    virtual void run(DenseView<const float> q, DenseView<const float> k, DenseView<const float> v,
                     float scale, DenseView<float> out, RowRange rows) = 0;
    /// `heads` attentions of one width d: head h is columns [h d, (h + 1) d) of q, k, v and out
    /// (each heads x d wide). Equal to run() per head; a backend may run them together.
    virtual void run_heads(DenseView<const float> q, DenseView<const float> k,
                           DenseView<const float> v, std::int64_t heads, float scale,
                           DenseView<float> out, RowRange rows);
    /// out[rows] = softmax_row(LeakyReLU(el_i + er_j) on the pattern) v; el is rows x 1 (the
    /// operator's rows) and er columns x 1, each with its own leading dimension (a column of a
    /// rows x heads matrix).
    virtual void run_additive(DenseView<const float> el, DenseView<const float> er,
                              float negative_slope, DenseView<const float> v, DenseView<float> out,
                              RowRange rows) = 0;
    virtual std::string algorithm() const = 0;
};

/// Which attention kernel a plan runs: the fused Fused3S kernel (fp16 tensor cores, approximate;
/// falls back to exact for widths it has no instance of and says so in algorithm()) or the exact
/// fp32 path (CPU: the reference in double, rounded; CUDA: SDDMM + softmax + cuSPARSE).
enum class AttentionKernel {
    exact,
    fused,
};

/// An SpMM whose dense input is column-quantized int8 (halo/quantize/quantize.hpp), dequantized in
/// the gather: y[rows] = A[rows] * dequantize(x), other rows untouched. The engine's first layer
/// runs it on a dataset's int8 features (halo-infer --int8-features), so they stay int8 in memory
/// and in the halo exchange. Exact, or AES-sampled when the backend samples
/// (CpuBackendOptions::aes, the CUDA backend's "aes:W" SpMM kernel).
class QuantizedSpmmPlan {
public:
    virtual ~QuantizedSpmmPlan() = default;
    virtual void run(const QuantizedView& x, DenseView<float> y, RowRange rows) = 0;
    virtual std::string algorithm() const = 0;
};

/// An operator's values as scalings of its pattern: a[i, j] = row[i] * col[j] for every stored
/// (i, j) (up to rounding: the engine's gcn operator of an unweighted graph is
/// D^-1/2 (A + I) D^-1/2, its mean operator D^-1 A). Empty: ones. Lets a backend stream the
/// pattern alone, 4 bytes per nonzero instead of 8.
struct OperatorScaling {
    std::vector<float> row;  // a.num_rows entries, or empty
    std::vector<float> col;  // a.num_cols entries, or empty
};

/// An SpMM operator that stays in host memory and runs over row blocks copied to the backend on
/// demand (out-of-core execution with all of the dense operand resident): prefetch() queues the
/// copy of a block's rows of the operator beside the work already issued (the CUDA backend: on a
/// copy stream, from page-locked memory), run() computes the block once its copy is in. A caller
/// prefetches block b + 1 before it runs block b, so that the copy overlaps the compute; at most
/// the blocks prefetched and not yet run, plus the one running, are held in backend memory. The
/// host CSR must outlive the object and stay unchanged.
class StreamedSpmm {
public:
    virtual ~StreamedSpmm() = default;
    /// Queues the copy of rows `rows` of the operator; returns at once.
    virtual void prefetch(RowRange rows) = 0;
    /// y = A[rows] x: y has rows.size() rows (backend memory), x every column of A as its rows.
    /// Uses the oldest prefetched block when it is `rows` (blocks run in the order they were
    /// prefetched); otherwise drops what was prefetched and copies `rows` now.
    virtual void run(RowRange rows, DenseView<const float> x, DenseView<float> y) = 0;
    /// Bytes copied to the backend so far (offsets, columns and values of the blocks).
    virtual std::int64_t copied_bytes() const = 0;
    virtual std::string algorithm() const = 0;
    /// Whether run() reads x with row j already multiplied by the operator's column scaling c_j
    /// (made so by scale_input), applying the row scaling alone: an operator asked for it and
    /// given a column scaling (the CUDA backend). Otherwise x is read as given.
    virtual bool scaled_input() const { return false; }
    /// x's row j times c_j for j in `rows`, in place (x: every column of A as its rows, backend
    /// memory), ordered before the runs issued after it. Only where scaled_input().
    virtual void scale_input(DenseView<float> x, RowRange rows);
};

/// An element that a 16-bit store of activations turned to infinity: where, and its value.
struct ActivationOverflow {
    std::int64_t row = 0;
    std::int64_t col = 0;
    float value = 0.0f;
    /// The `store` argument of the round_activations call that met it (the caller's tag).
    std::int32_t store = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;

    /// Uninitialized rows x cols matrix in this backend's memory.
    virtual Matrix allocate(std::int64_t rows, std::int64_t cols) = 0;
    /// Host <-> backend copies of a whole contiguous view.
    virtual void copy_from_host(const float* host, DenseView<float> dst) = 0;
    virtual void copy_to_host(DenseView<const float> src, float* host) = 0;

    /// Whether make_streamed_spmm streams a scaled operator's pattern alone (its bytes per
    /// nonzero over the bus then 4 instead of 8); the default keeps the values.
    virtual bool streams_scaled_operators() const { return false; }
    /// src to host memory (src.rows() x src.cols() floats at `host`), ordered after the work
    /// issued so far; returns before the copy ends where the backend can (the CUDA backend: on a
    /// copy stream, overlapping the compute issued next; `host` should be allocate_host memory),
    /// and keeps src alive until then. `host` must not be read before finish_downloads(). The
    /// default is copy_to_host.
    virtual void download_async(const Matrix& src, float* host);
    /// Waits for every download_async issued so far.
    virtual void finish_downloads() {}
    /// dst.rows x dst.cols floats at `host` into dst (backend memory), after the work issued so
    /// far; returns before the copy ends where the backend can (the CUDA backend: on an upload
    /// stream, where `host` is page-locked and dst contiguous; then copies issued back to back
    /// keep the bus busy while the compute stream works). Work issued after the matching
    /// wait_upload() sees the rows; `host` must stay unchanged until then. Every call, also
    /// one that throws, is matched by one wait_upload(). The default is copy_from_host.
    virtual void upload_async(const float* host, DenseView<float> dst);
    /// Orders the work issued next after the oldest upload_async not yet waited for (without
    /// blocking the host where the backend can).
    virtual void wait_upload() {}

    /// dst[r, :] = the seeded input features of node ids[r] for r < dst.rows (uniform in
    /// [-1, 1), a function of (seed, id, column) only: halo::random_node_features), generated
    /// where dst lives, with no host copy of the matrix on backends that override it. The
    /// default generates on the host and copies.
    virtual void fill_random_features(const global_id* ids, std::uint64_t seed,
                                      DenseView<float> dst);
    /// Host memory for staging what moves between host and backend (the row-block driver's layer
    /// inputs and outputs): page-locked on the CUDA backend, so copies run at the bus's speed;
    /// plain host memory by default.
    virtual Matrix allocate_host(std::int64_t rows, std::int64_t cols);
    /// best[r] = the argmax of row r of src (host memory, src.rows entries; the first index among
    /// equal maxima, as halo::argmax_rows), computed where src lives: on the CUDA backend only
    /// the indices cross the bus. The default copies the rows to the host.
    virtual void argmax_rows(DenseView<const float> src, std::int32_t* best);
    /// Makes the calling thread use this backend's device (the CUDA backend: cudaSetDevice of
    /// its context's device); a thread of one's own that calls the backend calls it first. The
    /// default does nothing.
    virtual void bind_thread() {}
    /// Whether the engine may run this backend with activations stored as `type`
    /// (EngineOptions::activations; docs/KERNELS.md "16-bit activations"): fp32 everywhere; fp16
    /// and bf16 on the CPU and CUDA backends, which compute the 16-bit roundings in fp32 memory.
    virtual bool stores_activations(FeatureType type) const { return type == FeatureType::fp32; }
    /// Every element of y rounded to `type` in place as a 16-bit store rounds it
    /// (halo::round_feature; fp32: nothing). Returns the first finite element (row-major
    /// order) that `type` stores as infinity (fp16: |v| >= 65520), tagged with `store`, nullopt
    /// where none; every element is rounded either way. A backend whose range check runs on the
    /// device (CUDA) returns nullopt at once, records the first such element of the calls in
    /// issue order and reports it from take_activation_overflow(): no synchronization per call,
    /// and a call may be recorded in a CUDA graph. The default throws LogicError for fp16 and
    /// bf16 (a backend whose stores_activations() says no).
    virtual std::optional<ActivationOverflow> round_activations(DenseView<float> y,
                                                                FeatureType type,
                                                                std::int32_t store);
    /// Whether this backend stores matrices of 16-bit elements (FeatureView of fp16 / bf16 in
    /// its memory, two elements per word of a Matrix; halo/core/feature_view.hpp) and computes
    /// on them through gemm_features, store_features, widen_features and
    /// SpmmPlan::run_features: the engine then stores 16-bit activations in 16 bits
    /// (docs/KERNELS.md "Storage in 16 bits"). The CPU and CUDA backends do.
    virtual bool stores_16bit() const { return false; }
    /// c = a b + beta c, beta 0 (c not read) or 1: a and b of one type (fp32, fp16 or bf16),
    /// products and sums in fp32 (c's elements widened where beta is 1), c of that type (the
    /// fp32 sums stored rounded to nearest even) or fp32. A 16-bit c is range-checked
    /// as store_features checks it (one rounding), tagged `store`; a backend that checks on the
    /// device may report an element that became infinite with the value inf. The default takes
    /// fp32 alone (gemm); another type throws halo::LogicError.
    virtual std::optional<ActivationOverflow> gemm_features(FeatureView a, FeatureView b,
                                                            MutableFeatureView c,
                                                            std::int32_t store,
                                                            float beta = 0.0f);
    /// dst = round(act(round(src) + bias)) element by element, round() the store to dst's type
    /// (round_feature; fp32: none), bias (backend memory, src.cols entries) may be null: what a
    /// step that writes src, stores it, adds the bias, applies the activation and stores it again
    /// computes (without a bias and activation: dst = round(src)). Equal shapes; dst and src must
    /// not overlap. The range check is round_activations': the first finite element that a
    /// rounding turns infinite (row-major over src; the first rounding's before the second's
    /// within an element), tagged `store`, returned, or recorded for take_activation_overflow()
    /// where the backend checks on the device. The default takes fp32 dst alone.
    virtual std::optional<ActivationOverflow> store_features(DenseView<const float> src,
                                                             const float* bias, Activation act,
                                                             MutableFeatureView dst,
                                                             std::int32_t store);
    /// dst = src widened exactly to fp32 (equal shapes). The default takes fp32 src alone.
    virtual void widen_features(FeatureView src, DenseView<float> dst);
    /// The first overflow that round_activations calls recorded instead of returning it, in the
    /// order they were issued, since the last take; forgets it. Waits for the work issued so far
    /// where there is one to read (never while recording). The default: nullopt (a backend that
    /// returns each overflow from its call).
    virtual std::optional<ActivationOverflow> take_activation_overflow() { return std::nullopt; }
    /// True where backend memory is host memory (the CPU backend): an exchanger for this backend
    /// then works on host matrices too.
    virtual bool uses_host_memory() const { return false; }
    /// Bytes of backend memory the engine may use when the user sets no limit (the CUDA backend:
    /// free device memory minus a margin); 0: no limit (the CPU backend).
    virtual std::int64_t default_memory_limit() { return 0; }

    /// Takes a host CSR (the shard's local operator) into the backend and prepares it.
    virtual std::unique_ptr<SpmmPlan> make_spmm_plan(const Csr& a) = 0;
    /// The same with what the engine knows about the operator; backends that use no hints
    /// ignore them.
    virtual std::unique_ptr<SpmmPlan> make_spmm_plan(const Csr& a, const SpmmPlanHints& hints)
    {
        static_cast<void>(hints);
        return make_spmm_plan(a);
    }

    /// A plan over the operator whose pattern is `pattern` (its values, if any, ignored) and
    /// whose values are scaling.row[i] * scaling.col[j] (OperatorScaling), made by the backend
    /// itself, so that the host never builds nor uploads them; null where the backend cannot for
    /// this kernel and hints (the caller then builds the values and calls make_spmm_plan). The
    /// default returns null; the CUDA backend makes them on the device for its cuSPARSE plans
    /// (`--spmm cusparse`, and `auto` without stored choices that apply).
    virtual std::unique_ptr<SpmmPlan> make_scaled_spmm_plan(const Csr& pattern,
                                                            const SpmmPlanHints& hints,
                                                            const OperatorScaling& scaling);

    /// `a` as a StreamedSpmm; `scaling` (may be null) factors its values. The default slices
    /// each block's rows out of `a` on the host and makes a plan of them (make_spmm_plan with the
    /// block as its one range) with a's values, so that a block's rows see the same kernel and
    /// arithmetic as in memory; the CUDA backend streams the rows into cuSPARSE, the pattern
    /// alone where `scaling` is given (the values made on the device).
    /// With `scaled_input`, the caller will scale x by the column scaling itself where the
    /// result says it wants that (StreamedSpmm::scaled_input: the CUDA backend, where the values
    /// then cost no gather of c_j); the default ignores it.
    virtual std::unique_ptr<StreamedSpmm> make_streamed_spmm(const Csr& a,
                                                             const SpmmPlanHints& hints,
                                                             const OperatorScaling* scaling,
                                                             bool scaled_input = false);

    /// MaxK aggregation over `a` (the gcn operator) for CBSR rows of `dim` with k entries.
    /// Backends without MaxK kernels throw halo::InputError naming themselves.
    virtual std::unique_ptr<MaxkPlan> make_maxk_plan(const Csr& a, std::int64_t dim, std::int64_t k,
                                                     const SpmmPlanHints& hints);
    /// Attention over the pattern of `a` (values ignored) for widths up to max_dim.
    virtual std::unique_ptr<AttentionPlan> make_attention_plan(const Csr& a, std::int64_t max_dim,
                                                               AttentionKernel kernel,
                                                               const SpmmPlanHints& hints);

    /// The int8-input SpMM over `a` (see QuantizedSpmmPlan); throws halo::InputError on backends
    /// without one.
    virtual std::unique_ptr<QuantizedSpmmPlan> make_quantized_spmm_plan(const Csr& a,
                                                                        std::int64_t max_dim);
    /// y = dequantize(x) (backend memory; equal shapes, y any ld).
    virtual void dequantize(const QuantizedView& x, DenseView<float> y) = 0;

    /// c = alpha * a * b + beta * c (row-major; beta == 0: c is not read).
    virtual void gemm(DenseView<const float> a, DenseView<const float> b, DenseView<float> c,
                      float alpha, float beta) = 0;
    /// y = alpha * x + beta * y, element-wise over equal shapes (beta == 0: y is not read).
    virtual void axpby(float alpha, DenseView<const float> x, float beta, DenseView<float> y) = 0;
    /// y[i, :] = act(y[i, :] + bias) for i in rows; bias (backend memory, y.cols entries) may be
    /// null.
    virtual void bias_activation(DenseView<float> y, const float* bias, Activation act,
                                 RowRange rows) = 0;
    /// y[i, :] = x[i, :] / max(||x[i, :]||_2, 1e-12) (torch.nn.functional.normalize); equal shapes.
    virtual void normalize_rows(DenseView<const float> x, DenseView<float> y) = 0;
    /// Recording for replay (CUDA graphs): begin_capture() starts recording the work issued from
    /// now on instead of running it, and returns false (changing nothing) when the backend cannot
    /// record; end_capture() ends the recording and prepares it, replay() issues the recorded
    /// work again. Nothing may synchronize or allocate while recording: such a call fails, and
    /// end_capture() then throws halo::Error (the recording is dropped).
    virtual bool begin_capture() { return false; }
    virtual void end_capture() {}
    virtual void replay() {}

    /// Waits for all work issued so far.
    virtual void synchronize() = 0;
};

/// The checks every backend's 16-bit calls make (kernels/reference/cpu_features.cpp): a view's
/// shape (ld >= cols, data unless empty), named `what` in the LogicError; gemm_features'
/// operands (each view, one type for a and b, c of it or fp32, the shapes, beta 0 or 1).
void check_feature_view(FeatureView x, const char* what);
void check_gemm_features(FeatureView a, FeatureView b, FeatureView c, float beta);

struct CpuBackendOptions {
    /// Set: SpMM plans run AES-SpMM's sampling (halo/kernels_host/aes.hpp, reference::aes_spmm),
    /// approximate; unset: the exact reference SpMM.
    std::optional<AesOptions> aes;
};

/// The CPU backend: host memory, OpenMP, the reference kernels.
std::unique_ptr<Backend> make_cpu_backend(CpuBackendOptions options = {});

}  // namespace halo
