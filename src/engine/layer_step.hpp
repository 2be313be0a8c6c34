// The engine split by layer type (internal to halo_engine; docs/ENGINE.md "Layer types"). Each
// layer type is one LayerStep in src/engine/layers/: it uploads its own weights, asks the
// StepContext for the operators it aggregates or attends with, and runs its forward step. What
// the steps share is here: the engine's work buffers, the operators (one per kind, shared by the
// layers that use it), and one control flow, StepContext::exchange_and_compute, which overlaps
// the halo exchange with the interior rows. src/engine/layers/layer_kinds.cpp lists every type
// once.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/exchanger.hpp"
#include "halo/core/memory_report.hpp"
#include "halo/core/model.hpp"
#include "halo/core/operators.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo::detail {

inline double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Column slice [first, first + cols) of a view (a head of a concatenated matrix).
template <typename T>
DenseView<T> columns(DenseView<T> m, std::int64_t first, std::int64_t cols)
{
    return {m.data + first, m.rows, cols, m.ld};
}

/// A rows x cols backend matrix holding `host` (row-major); empty when there is nothing to hold.
Matrix upload(Backend& backend, const std::vector<float>& host, std::int64_t rows,
              std::int64_t cols);

/// upload() of rows x cols host values, the copy's time and bytes added to t's transfer fields.
Matrix upload_timed(Backend& backend, const float* host, std::int64_t rows, std::int64_t cols,
                    LayerTiming& t);

/// [heads * d, heads]: column t holds head t's attention vector (att, heads * d entries) in rows
/// [t * d, (t + 1) * d), so that z * result gives every head's score of every row in one GEMM.
Matrix block_diagonal(Backend& backend, const std::vector<float>& att, std::int64_t heads);

/// The pattern an attention layer attends over.
enum class AttentionPattern {
    none,
    self_loops,  // A + I (agnn, gat)
    adjacency,   // the stored adjacency (transformer)
};

/// The three work buffers a layer may use besides its input (buffer indices, ascending).
struct LayerBuffers {
    int in = 0;
    int a = 1;
    int b = 2;
    int c = 3;
};

/// What layer steps run on: the backend and the exchanger, the shard's sizes, the engine's four
/// work buffers (n_total x max_dim each, allocated on first use), the operators shared by the
/// layers, the int8 input of the first layer, and the timing of a layer's steps.
class StepContext {
public:
    StepContext(Backend& backend, HaloExchanger& exchanger, const Shard& shard, const Model& model,
                const EngineOptions& options);

    Backend& backend;
    HaloExchanger& exchanger;
    const Shard& shard;
    const Model& model;
    const EngineOptions& options;
    const std::int64_t n_owned;
    const std::int64_t n_total;
    const bool has_peers;

    // --- Setup: the operators, built on first request and shared by every layer asking ---

    /// The host operator of `kind` (make_aggregation; the gcn one exchanges the halo degrees
    /// once, through the exchanger).
    const Csr& operator_matrix(Aggregation kind);
    /// Scalings that factor operator_matrix(kind)'s values (OperatorScaling), where they do: the
    /// gcn and mean operators built from an unweighted adjacency. None where the adjacency has
    /// edge weights or the dataset stores the operator normalized, and for sum (a pattern
    /// already, where unweighted). Needs the gcn degrees only, not the operator.
    std::optional<OperatorScaling> operator_scaling(Aggregation kind);
    /// The SpMM plan of operator `kind`: over its pattern and scalings where
    /// EngineOptions::device_operator_values asks and the backend makes the values
    /// (Backend::make_scaled_spmm_plan), else over operator_matrix(kind).
    SpmmPlan& spmm(Aggregation kind);
    /// The attention plan over `pattern` (not none) for widths up to the model's max_dim.
    AttentionPlan& attention(AttentionPattern pattern);
    /// The host pattern with self-loops (for the row-block driver).
    const Csr& self_loop_matrix();
    /// What the engine knows about operator `op` for its plans (row ranges, stored metadata).
    SpmmPlanHints hints_for(const std::string& op) const;
    /// A backend matrix of `rows` x `cols` holding `host` (empty host: an empty matrix).
    Matrix upload(const std::vector<float>& host, std::int64_t rows, std::int64_t cols)
    {
        return detail::upload(backend, host, rows, cols);
    }
    /// Asks for the shared wide buffer (n_total rows) of at least `cols` columns.
    void reserve_wide(std::int64_t cols) { wide_cols_ = std::max(wide_cols_, cols); }
    /// Allocates what was reserved; called once, after every step is made.
    void allocate_shared();
    /// A backend matrix of n_total x `cols` that the exchange may move: the exchanger's own
    /// memory where it has some (NCCL's registered buffers), else the backend's.
    Matrix exchangeable(std::int64_t cols);

    // --- Run: buffers, timing and the exchange ---

    /// Contiguous rows x cols view over work buffer k; owned(k, cols) and all(k, cols) take its
    /// owned rows and all n_total rows.
    DenseView<float> view(int k, std::int64_t rows, std::int64_t cols);
    DenseView<float> owned(int k, std::int64_t cols) { return view(k, n_owned, cols); }
    DenseView<float> all(int k, std::int64_t cols) { return view(k, n_total, cols); }
    /// c = a b + beta c on the backend (untimed: inside timed()). With the sparse input in use
    /// (use_sparse_input) and a the owned input rows (buffer 0, the input's width), beta 0: the
    /// input's SpMM plan times b instead of the dense product.
    void gemm(DenseView<const float> a, DenseView<const float> b, DenseView<float> c,
              float beta = 0.0f);
    /// y = act(y + bias) over the owned rows of y (bias may be empty), timed.
    void activate(LayerTiming& t, DenseView<float> y, const Matrix& bias, Activation act)
    {
        timed(t, [&] { backend.bias_activation(y, bias.data(), act, {0, n_owned}); });
    }
    /// The shared wide buffer (reserve_wide).
    const Matrix& wide() const { return wide_; }

    // --- 16-bit activations (EngineOptions::activations; docs/KERNELS.md) ---

    /// What the following stores belong to, for their errors: layer `index` (`last`: its
    /// output stays fp32), or the input of layer `index` (input(): the features, a
    /// checkpoint's rows).
    void begin_layer(std::size_t index, bool last);
    void begin_input(std::size_t index);
    /// y (a step's matrix, from owned row 0) as a 16-bit buffer holds it: every element rounded
    /// to the activation type; fp32: nothing. An element that fp16 cannot hold is an
    /// InputError naming the layer, the row's global id, the column and the value.
    void store(DenseView<float> y);
    /// Where the backend checks the stores' range later (the CUDA backend, on the device): the
    /// first overflow of the stores issued so far, raised as store() raises it. Waits for the
    /// work issued so far; nothing for fp32 or a backend that raised at each store.
    void check_stores();
    /// store() of what a step writes into the buffer it returns: left fp32 in the last layer.
    void store_output(DenseView<float> y)
    {
        if (!last_layer_) {
            store(y);
        }
    }
    FeatureType activations() const { return options.activations; }
    bool last_layer() const { return last_layer_; }

    // --- 16-bit storage (src/engine/packed.cpp; docs/KERNELS.md "Storage in 16 bits") ---

    /// Decides once, after every step is made and before a run, whether 16-bit activations are
    /// stored in 16 bits (packed()): the backend stores 16-bit matrices and every SpMM plan
    /// reads the type (layer kinds that do not pack_16bit widen). Otherwise they are rounded in
    /// fp32 memory, as defined; storage_note() says which and why.
    void decide_storage();
    bool packed() const { return packed_; }
    const std::string& storage_note() const { return storage_note_; }
    /// Work buffer k as rows x cols elements of the activation type (two per word).
    MutableFeatureView fview(int k, std::int64_t rows, std::int64_t cols);
    /// fp32 rows (at most n_owned) x cols (at most the widest width) apart from the work
    /// buffers: what a kernel writes in fp32 before it is stored in 16 bits.
    DenseView<float> scratch(std::int64_t rows, std::int64_t cols);
    /// c = a w + beta c (beta 0 or 1): w a step's weight matrix (fp32, rounded to the
    /// activation type once) read as that type (its 16-bit copy made on first use); a 16-bit c
    /// is stored as store() stores.
    void gemm_features(FeatureView a, const Matrix& w, MutableFeatureView c, float beta = 0.0f);
    /// dst = round(act(round(src) + bias)) (Backend::store_features): what a step computes
    /// when it stores src, adds the bias, applies the activation and stores again; bias may
    /// be empty. An fp16 overflow is raised as store() raises it.
    void store_features(DenseView<const float> src, const Matrix& bias, Activation act,
                        MutableFeatureView dst);
    /// aggregate() over a matrix of any element type (src: n_total rows; its words are what
    /// the exchange moves), the SpMM through SpmmPlan::run_features.
    void aggregate_features(SpmmPlan& op, MutableFeatureView src, DenseView<float> dst,
                            LayerTiming& t);
    /// Runs fn; with step timing, synchronizes and adds its time to t.dense.
    template <typename Fn>
    void timed(LayerTiming& t, Fn&& fn)
    {
        if (!options.step_timing) {
            fn();
            return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        backend.synchronize();
        t.dense += seconds_since(t0);
    }

    /// The one control flow layers share: exchanges the halo rows of `exchanged` while
    /// compute(interior rows) runs, then, once they arrived and arrived() prepared them, runs
    /// compute(boundary rows); without overlap the exchange completes first and compute runs once
    /// over all owned rows. `width` is the logical row width, for the fp32-equivalent byte count.
    void exchange_and_compute(DenseView<float> exchanged, std::int64_t width,
                              const std::function<void(RowRange)>& compute,
                              const std::function<void()>& arrived, LayerTiming& t);
    /// dst (owned rows) = op * src, exchanging src's halo rows, overlapping interior rows or,
    /// in OverlapMode::split, every owned row's local columns (op must come from spmm()).
    void aggregate(SpmmPlan& op, DenseView<float> src, DenseView<float> dst, LayerTiming& t);
    /// The aggregation of a layer's input x_all (n_total rows) with operator `kind`: from the int8
    /// rows when the first layer runs on them (run(QuantizedView)), else aggregate(op, x_all).
    void aggregate_input(Aggregation kind, SpmmPlan& op, DenseView<float> x_all,
                         DenseView<float> dst, LayerTiming& t);

    // --- The input ---

    /// Uploads int8 rows and parameters, dequantizes the owned rows into buffer 0 and keeps the
    /// backend view for the first layer (aggregate_input) until clear_int8_input().
    void load_quantized(const QuantizedView& host);
    bool has_int8_input() const { return int8_input_.has_value(); }
    void clear_int8_input() { int8_input_.reset(); }
    /// The owned input rows as an exact SpMM plan (owned rows x input width), for the first
    /// layer's transforms of the input (gemm). Null: none.
    void set_sparse_input(std::unique_ptr<SpmmPlan> plan) { sparse_input_ = std::move(plan); }
    const SpmmPlan* sparse_input() const { return sparse_input_.get(); }
    /// Whether gemm() multiplies the sparse input (on for the first layer of a run whose input
    /// is the matrix set_sparse_input() holds).
    void use_sparse_input(bool on) { sparse_input_on_ = on && sparse_input_ != nullptr; }
    bool using_sparse_input() const { return sparse_input_on_; }

    // --- Reports ---

    /// The SpMM plans made, by operator kind.
    const std::map<Aggregation, std::unique_ptr<SpmmPlan>>& spmm_plans() const { return spmm_; }
    const AttentionPlan* attention_plan(AttentionPattern pattern) const;
    /// Wall time spent building host operators so far (operator_matrix, operator_pattern,
    /// scalings, the gcn degrees' exchange, split blocks, self-loop patterns).
    double operator_seconds() const { return operator_seconds_; }
    /// Whether spmm() operators are split by columns (EngineOptions::overlap_mode; overlap on
    /// and halo rows to wait for).
    bool split_overlap() const;
    /// Backend memory of the operators, the work buffers and the input (not the layers').
    void add_memory(MemoryReport& r) const;

private:
    // An operator split by columns for OverlapMode::split: its local columns (all owned rows)
    // and its halo columns (boundary rows), and the boundary rows' halo sums before they are
    // added.
    struct SplitOperator {
        // The blocks, kept for the plans' lifetime (a plan may build kernels from its operator
        // later: an autotuned plan's released candidates, AutotunedSpmmPlan::release_unkept).
        Csr local_block, halo_block;
        std::unique_ptr<SpmmPlan> local, halo;
        Matrix partial;  // n_owned x max_dim; none where `halo` adds in place
        // Rows [0, end) run split; boundary rows from end on run whole (split_share).
        std::int64_t end = 0;
    };
    /// Where the split rows of operator `a` end (EngineOptions::split_share).
    std::int64_t split_end(const Csr& a) const;
    /// Starts the exchange of `exchanged`, runs during() (with overlap) while it travels, then
    /// arrived() and after(); step timing as exchange_and_compute.
    void exchange_around(DenseView<float> exchanged, std::int64_t width,
                         const std::function<void()>& during, const std::function<void()>& arrived,
                         const std::function<void()>& after, LayerTiming& t);
    /// The split of op (an spmm() plan), null when op is not split.
    SplitOperator* split_of(const SpmmPlan& op);
public:
    /// Every SpMM plan's SpmmPlan::release_unkept (the engine calls it after its first run,
    /// when the plans have chosen their kernels); returns the pieces freed.
    std::size_t release_unkept();
private:

    /// The gcn degrees of every local column (owned ones, then the halo ones exchanged), once.
    void ensure_degrees();
    /// The pattern of operator `kind` (gcn: with the self-loops added; else the stored one).
    const Csr& operator_pattern(Aggregation kind);

    /// The InputError of an overflow that store `overflow.store` met (its tag: layer * 2, + 1
    /// for a layer's input).
    [[noreturn]] void raise_overflow(const ActivationOverflow& overflow) const;

    /// The tag of the stores that follow (ActivationOverflow::store).
    std::int32_t store_tag() const
    {
        return static_cast<std::int32_t>(store_layer_ * 2 + (store_input_ ? 1 : 0));
    }
    /// raise_overflow where a call returned one.
    void raise_if(const std::optional<ActivationOverflow>& overflow) const
    {
        if (overflow) {
            raise_overflow(*overflow);
        }
    }

    bool packed_ = false;  // decide_storage
    std::string storage_note_;
    Matrix scratch_;                                    // scratch(), allocated by decide_storage
    std::map<const float*, Matrix> packed_weights_;     // gemm_features' 16-bit weights
    std::size_t store_layer_ = 0;  // begin_layer / begin_input
    bool store_input_ = false;
    bool last_layer_ = false;
    std::int64_t rows_moved_ = 0;  // sent + received rows of one exchange
    std::vector<float> degree_;    // gcn degrees of every local column, once exchanged
    std::map<Aggregation, Csr> matrices_;
    std::optional<Csr> gcn_pattern_;                    // operator_pattern(gcn), once asked for
    std::map<Aggregation, const Csr*> plan_operators_;  // what each spmm() plan was made over
    double operator_seconds_ = 0.0;
    std::map<Aggregation, std::unique_ptr<SpmmPlan>> spmm_;
    std::map<Aggregation, SplitOperator> split_;
    std::unique_ptr<AttentionPlan> self_loop_attention_;
    std::unique_ptr<AttentionPlan> adjacency_attention_;
    Csr self_loop_matrix_;
    std::vector<Matrix> buffers_{4};
    std::int64_t wide_cols_ = 0;
    Matrix wide_;
    // int8 input: the rows as bytes in words, the column parameters, the plans reading them.
    Matrix q_rows_, q_scale_, q_zero_;
    std::optional<QuantizedView> int8_input_;
    std::unique_ptr<SpmmPlan> sparse_input_;
    bool sparse_input_on_ = false;
    std::map<Aggregation, std::unique_ptr<QuantizedSpmmPlan>> quantized_spmm_;
};

/// One layer of a model, of one type: its weights, the operators it asked the context for, and
/// its forward step.
class LayerStep {
public:
    virtual ~LayerStep() = default;
    /// Runs the layer on work buffer `buffers.in` (owned rows; the step exchanges what it
    /// aggregates) and returns the buffer holding its output (owned rows, out_dim wide).
    virtual int forward(StepContext& ctx, const LayerBuffers& buffers, LayerTiming& t) = 0;
    /// Adds the backend memory the layer holds itself (weights, its own buffers and plans).
    /// `gcn_pattern_counted`: whether the gcn operator's nonzeros are already in the report.
    virtual void add_memory(MemoryReport& r, bool& gcn_pattern_counted) const = 0;
    /// Lines about the layer's own plans (e.g. maxk's kernel) for the kernel report, or empty;
    /// `index` is the layer's.
    virtual std::string report(std::size_t index) const
    {
        static_cast<void>(index);
        return {};
    }
};

/// 4 bytes per element of a backend matrix.
inline std::int64_t matrix_bytes(const Matrix& m)
{
    return 4 * m.rows() * m.cols();
}

/// Adds the matrices' bytes to r.weights.
inline void add_weights(MemoryReport& r, std::initializer_list<const Matrix*> matrices)
{
    for (const auto* m : matrices) {
        r.weights += matrix_bytes(*m);
    }
}

/// A layer's arrays on a backend as the model holds them, every one its LayerTypeInfo marks
/// `upload` (a vector as 1 x n; the transformer's projections and gat's attention vectors are
/// the steps' own): weight, bias, root_weight, weight2 and bias2 by name, any other in `other`;
/// a matrix the layer lacks stays empty (agnn without a weight).
struct LayerWeights {
    /// `gemm_type`: the type the layer's GEMMs read their input in (16-bit activations): weight,
    /// root_weight and weight2 are rounded to it once, before the upload (biases stay fp32).
    LayerWeights(const Layer& layer, Backend& backend, FeatureType gemm_type = FeatureType::fp32);
    Matrix weight, bias, root_weight, weight2, bias2;
    std::map<std::string, Matrix, std::less<>> other;
    /// The array `name` (empty where the layer has none).
    const Matrix& get(std::string_view name) const;
    void add_to(MemoryReport& r) const
    {
        add_weights(r, {&weight, &bias, &root_weight, &weight2, &bias2});
        for (const auto& [name, m] : other) {
            r.weights += matrix_bytes(m);
        }
    }
};

/// A step with its layer's dense weights.
class WeightedStep : public LayerStep {
public:
    /// `gemm_type`: LayerWeights'; the steps whose GEMMs read 16-bit activations pass
    /// ctx.options.activations, the ones that widen them fp32.
    WeightedStep(const Layer& layer, StepContext& ctx, FeatureType gemm_type = FeatureType::fp32);
    void add_memory(MemoryReport& r, bool&) const override { w_.add_to(r); }

protected:
    const Layer& layer_;
    LayerWeights w_;
};

/// A step that aggregates with its kind's SpMM operator (gcn, sage, gin).
class SpmmStep : public WeightedStep {
public:
    SpmmStep(const Layer& layer, StepContext& ctx);

protected:
    Aggregation kind_;
    SpmmPlan& op_;
};

/// A step that attends over its kind's pattern (agnn, transformer, gat).
class AttentionStep : public WeightedStep {
public:
    AttentionStep(const Layer& layer, StepContext& ctx);

protected:
    AttentionPlan& attention_;
};

/// One row block of a layer's aggregation phase out of core, as the row-block driver hands it to
/// the layer's BlockStep: the block's rows of the operator (columns renumbered to the rows of z
/// that `src` holds), where the block's own rows of the layer input and of z are on the host, the
/// output to fill, and the timing of its steps.
struct BlockRun {
    Backend& backend;
    const Csr& block;
    const Matrix& src;         // the rows of z the block reads (gathered, or all of z)
    RowRange rows;             // {0, rows of the block}
    std::int64_t first = 0;    // the block's first owned row
    const float* x = nullptr;  // host layer input, n_owned x in_dim
    const float* z = nullptr;  // host z, n_owned x z width (the transform's output)
    Matrix& out;               // rows x out_dim, backend memory
    AttentionKernel attention = AttentionKernel::fused;
    std::int64_t max_dim = 0;  // the model's widest width
    bool step_timing = false;
    LayerTiming& t;
    std::chrono::steady_clock::time_point t0{};
    /// Set when all of z is resident (src is z, in its own numbering): the operator's rows stream
    /// through it, and `block` is empty.
    StreamedSpmm* streamed = nullptr;

    /// Hints for a block plan of operator `op`: the block's rows as its one range.
    SpmmPlanHints hints(std::string_view op) const;
    /// y (the block's rows) = the block's rows of operator `op` times src: through `streamed`
    /// where set, else a plan of `block`.
    void spmm(std::string_view op, DenseView<float> y);
    /// The block's rows of a host matrix `cols` wide (x or z) on the backend, the copy timed.
    Matrix up_rows(const float* host, std::int64_t cols);
    /// The block's own rows of z: a view of src where z is resident, else an upload of the host
    /// z's rows kept in `holder`.
    DenseView<const float> z_rows(Matrix& holder, std::int64_t cols);
    /// Timing marks: from now on; what ran since the last mark was SpMM / dense work.
    void mark() { t0 = std::chrono::steady_clock::now(); }
    void spmm_done() { done(t.spmm); }
    void dense_done() { done(t.dense); }

private:
    void done(double& into);
};

/// A layer type's step out of core (src/engine/row_block_driver.cpp splits rows into blocks,
/// exchanges and gathers z, and moves blocks between host and backend): its resident weights,
/// what its aggregation phase holds per block row and per gathered column, and its computation
/// on one block.
class BlockStep {
public:
    BlockStep(const Layer& layer, Backend& backend) : layer_(layer), w_(layer, backend) {}
    virtual ~BlockStep() = default;

    const LayerWeights& weights() const { return w_; }
    /// Bytes of the resident weights.
    virtual std::int64_t resident_bytes() const;
    /// Whether the layer aggregates its input itself (no transform phase; z is the input).
    virtual bool aggregate_first() const { return false; }
    /// Width of z, the matrix the aggregation reads and the exchange moves.
    virtual std::int64_t z_width() const { return layer_.out_dim; }
    /// Floats per block row the aggregation holds besides its output row.
    virtual std::int64_t row_floats() const { return 0; }
    /// Bytes per gathered column besides its row of z, and the part of them that is kernel
    /// metadata (maxk's CBSR row) in the memory report.
    virtual std::int64_t col_bytes() const { return 0; }
    virtual std::int64_t col_metadata_bytes() const { return 0; }
    /// Whether all of z may stay resident instead of being gathered per block (SpMM layers),
    /// and the operator it then streams (kernel_operator_gcn or kernel_operator_adjacency).
    virtual bool z_may_stay() const { return false; }
    virtual std::string_view spmm_operator() const { return kernel_operator_adjacency; }
    /// Whether the aggregation reads nothing of the layer's input but z, and z only through its
    /// SpMM (BlockRun::x and z_rows unused): then the previous layer's blocks may compute z from
    /// their output rows (a layer that transforms first never needs its input), and a streamed
    /// operator may read z scaled by its column scaling (RowBlockDriver).
    virtual bool fuses_transform() const { return false; }
    /// After z = x W on a block of `rows` rows (maxk: + b; linear: the whole layer).
    virtual void transform_epilogue(Backend& backend, DenseView<float> z, std::int64_t rows) const
    {
        static_cast<void>(backend);
        static_cast<void>(z);
        static_cast<void>(rows);
    }
    /// The aggregation and the rest of the layer on one block.
    virtual void aggregate(BlockRun& run) const;

protected:
    const Layer& layer_;
    LayerWeights w_;
};

template <typename Step>
std::unique_ptr<LayerStep> make_step(const Layer& layer, StepContext& ctx)
{
    return std::make_unique<Step>(layer, ctx);
}

template <typename Step>
std::unique_ptr<BlockStep> make_block_step(const Layer& layer, Backend& backend)
{
    return std::make_unique<Step>(layer, backend);
}

/// What the engine knows of a layer type before it makes its step.
struct LayerKind {
    LayerType type = LayerType::gcn;
    /// The SpMM operator the layer aggregates with (maxk: the gcn one, through its own plan).
    std::optional<Aggregation> aggregation = std::nullopt;
    AttentionPattern attention = AttentionPattern::none;
    /// True when the layer runs in two work buffers (its input's and one more).
    bool two_buffers = false;
    /// Whether its step stores 16-bit activations in 16 bits (StepContext::packed(): reads
    /// and writes its work buffers through fview); the others widen: their fp32 step runs on
    /// the input widened from 16 bits, and their output is stored in 16 bits after it
    /// (Engine::Impl::forward_widened).
    bool packs_16bit = false;
    std::unique_ptr<LayerStep> (*make)(const Layer& layer, StepContext& ctx) = nullptr;
    /// Its step out of core; null where row blocks do not run the type.
    std::unique_ptr<BlockStep> (*make_blocks)(const Layer& layer, Backend& backend) = nullptr;
};

/// The kind of `type` (src/engine/layers/layer_kinds.cpp).
const LayerKind& layer_kind(LayerType type);
/// The names of the types with a BlockStep, in table order ("gcn, sage, ...").
std::string out_of_core_types();

// Each layer type's kind, beside its step in src/engine/layers/.
#define HALO_LAYER_TYPE(name) extern const LayerKind name##_kind;
#include "halo/core/layer_types.def"
#undef HALO_LAYER_TYPE

/// A CSR with values as the engine counts an operator whose plan does not report its memory.
MemoryReport csr_memory(const Csr& a);

}  // namespace halo::detail
