// The layer-wise inference engine (docs/ARCHITECTURE.md "Data flow"): for each layer, start the
// halo exchange, aggregate interior rows, finish the exchange, aggregate boundary rows, combine,
// apply the activation. Backend-free: the backend and the exchanger are interfaces.
//
// Reduction order. Every output row is a fixed function of its own input rows: the SpMM visits a
// row's nonzeros in the shard's stored order, which is ascending global column id for every rank
// count (partition/shard.cpp), and GEMM sums over the inner dimension in order. So the result of
// P ranks equals the result of one rank bit for bit on the CPU backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "halo/core/exchanger.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/memory_report.hpp"
#include "halo/core/model.hpp"
#include "halo/core/operators.hpp"
#include "halo/core/shard.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo {

/// Per-layer timing on one rank, in seconds.
struct LayerTiming {
    double total = 0.0;     // wall time of the layer
    double compute = 0.0;   // spmm + dense
    double spmm = 0.0;      // the aggregation (interior and boundary rows)
    double dense = 0.0;     // GEMM and element-wise steps
    double exchange = 0.0;  // time in start() and finish() of the exchange
    double waiting = 0.0;   // part of `exchange` spent blocked in finish()
    /// --step-timing only: time in a barrier before each exchange, waiting for the slowest peer
    /// to arrive (the ranks' compute imbalance); `exchange` leaves it out.
    double skew = 0.0;
    std::int64_t exchanged_bytes = 0;  // sent + received, as the exchanger moved them
    /// What the layer's exchanges would have moved as fp32 rows of the exchanged width (sent +
    /// received): exchanged_bytes is smaller when rows travel compressed (maxk's CBSR records,
    /// --exchange int8).
    std::int64_t fp32_exchange_bytes = 0;
    /// Out of core (EngineOptions::device_memory_limit): seconds in host <-> backend copies of
    /// row blocks and the bytes they moved (0 in memory).
    double transfer = 0.0;
    std::int64_t transferred_bytes = 0;
    /// Out of core: the row blocks the layer ran in (0 in memory).
    std::int64_t row_blocks = 0;
};

/// Where the engine runs a layer: all of the shard in backend memory, or over row blocks streamed
/// from host memory (src/engine/row_block_driver.cpp; docs/ENGINE.md "Out-of-core execution").
enum class Execution {
    automatic,   // row blocks when the in-memory working set exceeds the memory limit
    in_memory,   // never row blocks
    row_blocks,  // always row blocks (tests; measurements)
};

/// Out of core, how an operator whose values are row and column scalings of its pattern (gcn,
/// mean) streams through the backend (docs/ENGINE.md "Out-of-core execution"):
enum class OperatorStream {
    /// The pattern alone where that costs no gather of the column scaling per nonzero: a row
    /// scaling only (mean), or one part without peers whose layers read z through their SpMM
    /// alone (gcn: z's rows are scaled by the column scaling once per layer); else the values.
    /// On one H200 at R-MAT 26, 2-layer gcn, 24 GiB: 1.03 s against 1.24 s with the values.
    automatic,
    /// The pattern alone, the values made on the device (r_i c_j: a gather of c_j per nonzero
    /// where z is not scaled): 4 bytes per nonzero less over the bus, 4 (n + N) bytes resident.
    pattern,
    /// The values, copied with the pattern (8 bytes per nonzero).
    values,
};

/// What the SpMM layers (gcn, sage, gin) aggregate while their halo rows are on the way.
enum class OverlapMode {
    /// split on backends with their own memory (CUDA), interior on the host backend
    automatic,
    /// the interior rows (no halo column); the boundary rows once the halo rows arrived
    interior,
    /// every owned row's local columns (the operator split into its local and halo columns,
    /// as PETSc's diagonal and off-diagonal blocks); once the halo rows arrived, the halo
    /// columns of the boundary rows, added. Hides more where few rows are interior (power-law
    /// graphs: 0.6% of R-MAT 22's nonzeros at 4 parts); the sum's order changes, so results
    /// differ from the interior mode's by rounding.
    split,
};

struct EngineOptions {
    bool overlap = true;  // aggregate while the exchange is in flight (overlap_mode says what)
    OverlapMode overlap_mode = OverlapMode::automatic;
    /// OverlapMode::split: the share (0 to 1) of the boundary rows' local nonzeros that run
    /// split, the first boundary rows in order: their local columns during the exchange, their
    /// halo columns added after it. The other boundary rows run whole once the halo rows
    /// arrived (one SpMM pass instead of two, the result of the interior mode for them).
    /// 1: every row split (the most work beside the exchange); 0: the interior mode's
    /// arithmetic.
    double split_share = 1.0;
    bool keep_layers = false;  // keep every layer's output (for --save-layers)
    /// What the dataset's stored values are ("none", "gcn", "mean"); see make_aggregation.
    std::string dataset_normalization = "none";
    /// Called before each layer with its index (progress reports; fault injection in tests).
    std::function<void(std::size_t)> before_layer;
    /// In memory, outside a replay: called after each layer with its index and a host copy of
    /// its output rows (num_owned x the layer's out_dim, valid during the call): halo-infer
    /// --checkpoint writes them. Out of core it is an error to set it (Engine's constructor).
    std::function<void(std::size_t, std::span<const float>)> after_layer;
    /// This part's kernel metadata from the dataset (read_kernel_metadata), handed to the
    /// backend's plans with the operator it belongs to (SpmmPlanHints).
    std::vector<KernelMetadata> kernel_metadata;
    /// The kernel of the attention layers (agnn, transformer; gat always runs the exact path).
    AttentionKernel attention = AttentionKernel::fused;
    /// Synchronize the backend after every step (GEMMs, interior and boundary aggregation, the
    /// exchange's start and finish) so that LayerTiming splits the layer's time into compute,
    /// spmm, dense and exchange. false: one synchronization per layer, LayerTiming::total only
    /// (the other fields stay 0 except exchanged bytes): less host overhead on small graphs,
    /// where those synchronizations cost as much as the kernels.
    bool step_timing = true;
    /// Without step_timing: before each halo exchange, wait for the backend and for every rank
    /// (HaloExchanger::barrier), so that the exchange starts on all ranks at once rather than as
    /// each finishes its previous work (step_timing does this too, besides its other waits).
    /// Same results; on one part nothing. Off by default: on 4 GPUs the step-timed runs, which
    /// include this barrier, were 1.5-4% faster than the default ones (docs/NOTEBOOK.md,
    /// "Registered exchange buffers"), and this option, which adds only the barrier, is there to
    /// find out whether the barrier is why (halo-infer --exchange-barrier).
    bool exchange_barrier = false;
    /// Record the forward pass once (a CUDA graph, on backends that can) and replay it on later
    /// runs: one launch instead of one per kernel, for small graphs where launches dominate.
    /// Only for a single part without step_timing and keep_layers; the first run() runs as usual
    /// (plans allocate then), the second records and replays, later ones replay; a run that
    /// threw (an fp16 overflow) does not count as the first. When recording
    /// fails the engine runs as usual and kernel_report() says why. LayerTiming is then not
    /// measured per layer: forward_seconds() gives the replay's time.
    bool replay = false;
    /// Bytes of backend memory the engine may use (halo-infer --device-memory-limit); 0: the
    /// backend's default (Backend::default_memory_limit(); none on the CPU backend). With
    /// Execution::automatic a working set above it runs over row blocks sized to fit it.
    std::int64_t device_memory_limit = 0;
    Execution execution = Execution::automatic;
    /// Out of core, resident mode: how an operator whose values are scalings of its pattern
    /// streams (OperatorStream; Backend::streams_scaled_operators, the CUDA backend).
    OperatorStream operator_stream = OperatorStream::automatic;
    /// In memory: an SpMM operator whose values are scalings of its pattern (the gcn and mean
    /// operators of an unweighted graph; StepContext::operator_scaling) goes to the backend as
    /// the pattern and the scalings, and the backend makes the values itself where it can for
    /// its kernel (Backend::make_scaled_spmm_plan: the CUDA backend's cuSPARSE plans): the host
    /// then neither builds nor uploads them, and a mean operator is the stored adjacency itself,
    /// not a copy. The values are r_i c_j rounded in float instead of 1 / sqrt(d_i d_j) rounded
    /// once, a difference in the last bit. false: the host builds every operator's values.
    bool device_operator_values = true;
    /// The type the matrices between and inside layers are stored in (halo-infer
    /// --activations; docs/KERNELS.md "16-bit activations"): fp32, or fp16 / bf16 with fp32
    /// sums, the GEMMs' weights rounded to the same type once, the last layer's output fp32.
    /// Needs a backend that stores_activations(); refused out of core and with int8 input.
    FeatureType activations = FeatureType::fp32;
    /// 16-bit activations stored in 16 bits (the work buffers two elements per word, the
    /// exchange moving half the bytes) where the backend, every layer type and every SpMM plan
    /// can (docs/KERNELS.md "Storage in 16 bits"; activation_storage() says what ran); false:
    /// rounded in fp32 memory everywhere. Both compute the same roundings.
    bool store_16bit = true;
};

class Engine {
public:
    /// Prepares the operators the model needs (exchanging degrees once through `exchanger` when a
    /// gcn or maxk layer needs them) and the backend buffers. `exchanger` must serve matrices up
    /// to model.exchange_width() wide.
    Engine(Backend& backend, HaloExchanger& exchanger, const Shard& shard, const Model& model,
           EngineOptions options);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    /// Runs the model on `features` (host, num_owned x model.input_dim(), row-major) and returns
    /// the output of the last layer (host, num_owned x output_dim).
    std::vector<float> run(const std::vector<float>& features);

    /// The same on column-quantized int8 features (host view, num_owned x model.input_dim(), the
    /// dataset's per-column scale and zero point, the same on every rank): they are uploaded as
    /// int8, and a first layer that aggregates first (gcn, sage, gin) exchanges its halo rows as
    /// int8 and aggregates them with the backend's int8-input SpMM (dequantized in the gather);
    /// terms that need the node's own row, and other first layers, read them dequantized on the
    /// backend. The result equals run() on the dequantized features up to summation rounding.
    std::vector<float> run(const QuantizedView& features);

    /// Runs the model on the seeded random features of the shard's rows
    /// (random_node_features(shard.global_ids, model.input_dim(), seed)), generated on the
    /// backend (Backend::fill_random_features): no host copy, nothing uploaded but the ids.
    std::vector<float> run_random(std::uint64_t seed);
    /// The three runs above, leaving the output (num_owned x output_dim) in a host buffer the
    /// engine owns and reuses, valid until the next run: no allocation, zero fill or page fault
    /// per run, and no copy into a new vector (what halo-infer writes from).
    std::span<const float> forward(const std::vector<float>& features);
    std::span<const float> forward(const QuantizedView& features);
    std::span<const float> forward_random(std::uint64_t seed);
    /// Runs layers [first_layer, layers) on `input`, the output of layer first_layer - 1
    /// (num_owned x its out_dim, host; e.g. a checkpoint's rows): the same rows and the same
    /// arithmetic as a whole run from there, so the result equals it bit for bit where the whole
    /// run's does. first_layer == layers returns the input. In memory only (an InputError out
    /// of core).
    std::span<const float> forward_from(std::size_t first_layer, const std::vector<float>& input);
    /// The same on features already in backend memory (num_owned x model.input_dim(), e.g.
    /// uploaded while the part was read: FeatureUpload): copied into the first layer's input on
    /// the backend (out of core: into the driver's host input), so the result equals forward()
    /// on the same values bit for bit. `features` may be dropped once this returns.
    std::span<const float> forward(const Matrix& features);
    /// Declares that the features of the following forward(features) and run(features) calls
    /// (fp32, host or backend) equal `features` (num_owned x model.input_dim(), e.g. the
    /// dataset's bag-of-words rows, built once from the same values): the first layer's
    /// transforms of its input (x W) then multiply this sparse matrix (the backend's exact SpMM
    /// plan) instead of the dense rows. Results equal the dense product's up to summation
    /// rounding (on the CPU backend bit for bit: the zero terms a dense sum adds change nothing).
    /// Random and int8 inputs, and runs over row blocks, keep the dense product. Returns false,
    /// and keeps the dense product, where the backend's SpMM plan is not exact (AES). The caller
    /// keeps the promise; nothing checks it per run.
    bool set_sparse_input(const Csr& features);
    /// What set_sparse_input() chose, one line (empty when it was not called).
    std::string sparse_input_note() const;
    /// How 16-bit activations are stored, one line ("--activations bf16: stored in 16 bits",
    /// or rounded in fp32 memory and why); empty for fp32 and out of core.
    std::string activation_storage() const;
    /// The next run leaves its output in backend memory: forward() returns an empty span
    /// (download_seconds() 0), and download_rows() copies rows of the output to the host until
    /// the run after it (halo-infer downloads the rows batch by batch while it writes them). Out
    /// of core the output is in host memory already, and the run returns it as always.
    void defer_download();
    /// Rows [first, first + count) of the output a deferred run left on the backend, to `host`
    /// (count x output_dim floats; page-locked memory copies at the bus's speed). May be called
    /// from any thread that has called Backend::bind_thread, one call at a time.
    void download_rows(std::int64_t first, std::int64_t count, float* host) const;
    /// The argmax of every row of that output (num_owned entries at `best`, halo::argmax_rows's
    /// values), computed on the backend (Backend::argmax_rows).
    void deferred_predictions(std::int32_t* best) const;
    const std::vector<LayerTiming>& timings() const { return timings_; }
    /// Wall time of the last run's input step: the features' upload, or their generation (or
    /// their copy on the backend).
    double input_seconds() const { return input_seconds_; }
    /// Whether the last run replayed a recorded forward pass (EngineOptions::replay): then
    /// timings() holds no per-layer times, only forward_seconds().
    bool replayed() const { return replayed_; }
    /// Wall time of the last run's download of the output.
    double download_seconds() const { return download_seconds_; }
    /// Wall time of the last run's layers (the sum of timings()[l].total, or the replay's time).
    double forward_seconds() const { return forward_seconds_; }
    /// Each SpMM operator's kernel (SpmmPlan::algorithm()) and the run-time decisions of its plan
    /// (SpmmPlan::report(), e.g. the autotuned kernel per row range and width), then the other
    /// plans' and the forward pass's recording; one line each.
    std::string kernel_report() const;
    /// New kernel decisions of the operators' plans worth storing in the dataset (the autotuner's
    /// choices; SpmmPlan::tuning_metadata), one entry per operator pattern.
    std::vector<KernelMetadata> tuning_metadata() const;
    /// Wall time the operators' plans spent timing kernels so far (SpmmPlan::tuning_seconds):
    /// the tuning inside the first run's layers.
    double tuning_seconds() const;
    /// Wall time of the constructor spent building host operators (normalization, self-loops,
    /// the gcn degrees' exchange); the rest of it is the backend's plans and buffers.
    double operator_seconds() const;
    /// Host copies of every layer's output when EngineOptions::keep_layers is set.
    const std::vector<std::vector<float>>& layer_outputs() const { return layer_outputs_; }

    /// True when the engine runs over row blocks (EngineOptions::device_memory_limit).
    bool out_of_core() const;
    /// The backend memory the engine holds, by component (docs/ENGINE.md "Memory accounting");
    /// out of core, the largest row block's budget.
    MemoryReport memory_report() const;

private:
    std::span<const float> run_row_blocks(double input_seconds);
    // From the input in buffer 0 (and int8 rows, if any), layers [first, layers).
    std::span<const float> run_layers(std::size_t first = 0);
    std::span<const float> timed_download(int buffer);  // the output of `buffer`, timed

    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::vector<LayerTiming> timings_;
    std::vector<std::vector<float>> layer_outputs_;
    double forward_seconds_ = 0.0;
    double input_seconds_ = 0.0;
    double download_seconds_ = 0.0;
    bool replayed_ = false;
};

/// Seeded input features: row r of the result is a function of (global_ids[r], seed) only, so
/// every rank count produces the same input. Values uniform in [-1, 1).
std::vector<float> random_node_features(const std::vector<global_id>& global_ids, std::int64_t dim,
                                        std::uint64_t seed);

}  // namespace halo
