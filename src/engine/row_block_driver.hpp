// Out-of-core execution (docs/ENGINE.md "Out-of-core execution"): the engine's layers
// run over row blocks whose backend memory fits a limit, with layer inputs and outputs in host
// memory (Backend::allocate_host). Internal to halo_engine.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "halo/core/exchanger.hpp"
#include "halo/core/memory_report.hpp"
#include "halo/core/model.hpp"
#include "halo/core/shard.hpp"
#include "halo/engine/engine.hpp"
#include "halo/kernels_host/backend.hpp"
#include "layer_step.hpp"

namespace halo::detail {

/// Runs a model layer by layer, each layer over row blocks of the owned rows:
///
///  1. a layer that transforms first (or has no aggregation) computes its transformed rows block
///     by block (rows of x up, rows of z = x W down into a host matrix);
///  2. the halo rows of the aggregated matrix z (z = x when the layer aggregates first) are
///     exchanged on the host matrix, while the blocks of interior rows (which reference no halo
///     row) run; through a backend buffer, before any block, where the backend's memory is not
///     host memory;
///  3. block by block: the block's CSR rows, and either the rows of z its columns reference
///     (columns renumbered in ascending order, so every row keeps its summation order) or all of
///     z when z takes at most half of the budget, go up; the aggregation and the rest of the
///     layer run on the block; its output rows come down into the layer's host output.
///  4. where layers l and l + 1 both keep z resident and layer l + 1 transforms first with a
///     step that reads nothing of its input but z (BlockStep::fuses_transform: gcn), layer l's
///     blocks also compute layer l + 1's z rows from their output rows while these are on the
///     backend and send those down instead; layer l + 1 then skips its transform phase and
///     uploads them (z narrower than the output: fewer bytes down, and z instead of x up).
///     Not when every layer's output is kept (EngineOptions::keep_layers).
///
/// Every step is the in-memory engine's step on a subset of rows, with the same kernels and
/// the same per-row arithmetic, so on the CPU backend the result equals the in-memory run bit for
/// bit. Block sizes come from the budget: each phase's bytes are fixed + per_row * rows +
/// per_nnz * nonzeros + per_col * distinct columns (docs/ENGINE.md gives the terms).
class RowBlockDriver {
public:
    /// `layer_operators[l]`: the host operator layer l aggregates with (gcn, sage, gin, maxk) or
    /// attends over (gat), null for linear; they must outlive the driver. Throws halo::InputError
    /// for a layer type it cannot run (naming it) and for a limit too small for one row (naming
    /// the limit and the smallest that would work).
    /// The backend, exchanger, shard, model and options (step timing, overlap, attention kernel)
    /// are the engine's, through `ctx`. What the exchanger may allocate beside the pool on a
    /// part with peers (HaloExchanger::staging_bytes) comes off the limit first.
    RowBlockDriver(StepContext& ctx, std::vector<const Csr*> layer_operators, std::int64_t limit);

    /// The host matrix the next run() reads as the model's input (num_owned rows of the input
    /// width, then room for the halo rows; Backend::allocate_host memory, allocated once and
    /// kept): a caller fills its owned rows in place, with no copy of its own.
    float* input();
    /// Runs the model on the owned rows of input(); timings get one entry per layer; `keep` (may
    /// be null) receives every layer's owned rows. The result (num_owned x output width) is a
    /// view of the driver's host memory, valid until the next run or input().
    std::span<const float> run(std::vector<LayerTiming>& timings,
                               std::vector<std::vector<float>>* keep);

    /// Resident bytes plus the largest block's budget, by component.
    MemoryReport memory_report() const { return report_; }
    /// One line per layer: its blocks and whether z was gathered or resident.
    std::string report() const;
    /// The smallest limit with which every layer runs (one row per block at worst).
    std::int64_t minimum_limit() const { return minimum_; }

private:
    struct Cost {
        std::int64_t fixed = 0;
        std::int64_t per_row = 0;
        std::int64_t per_nnz = 0;
        std::int64_t per_col = 0;
        std::int64_t bytes(std::int64_t rows, std::int64_t nnz, std::int64_t cols) const
        {
            return fixed + per_row * rows + per_nnz * nnz + per_col * cols;
        }
    };
    struct Block {
        RowRange rows;
        std::int64_t nnz = 0;
        std::int64_t cols = 0;
        std::int64_t bytes = 0;
    };
    struct LayerPlan {
        const Csr* op = nullptr;
        bool agg_first = false;
        // Gather the referenced rows of z per block; else all of z is resident on the backend
        // (computed there by the transform blocks) and the operator's rows stream through it.
        bool compact = true;
        std::int64_t wz = 0;    // width of the aggregated matrix z
        Cost pre;               // transform phase (absent when agg_first)
        Cost agg;               // aggregation phase
        std::int64_t need = 0;  // the smallest limit for this layer
        std::int64_t worst_row = -1;
        std::int64_t worst_nnz = 0;
        // Fused into the next layer's transform: the last keep_rows owned rows of the next z
        // stay on the backend (kept_) instead of going down and up again (plan_fusion).
        std::int64_t keep_rows = 0;
        std::vector<Block> pre_blocks;
        std::vector<Block> agg_blocks;
    };

    std::vector<Block> split(const Csr* a, const Cost& cost, bool compact,
                             std::int64_t max_nnz = INT64_MAX);
    void plan_layer(std::size_t l);
    void plan_all();
    void split_layer(std::size_t l);
    void report_layer(std::size_t l);
    void transform(const BlockStep& step, DenseView<const float> x, DenseView<float> z,
                   std::int64_t rows, LayerTiming& t);
    void run_pre(std::size_t l, const Matrix& x, const Matrix& z, LayerTiming& t);
    bool exchange_start(const Matrix& z, std::int64_t width, LayerTiming& t);
    void exchange_finish(LayerTiming& t);
    void run_aggregation(std::size_t l, const Matrix& x, const Matrix& z, const Matrix& out,
                         bool exchanging, LayerTiming& t);
    void run_resident(std::size_t l, const Matrix& x, const Matrix& out, const Matrix* z_in,
                      const Matrix* z_next, LayerTiming& t);
    std::vector<RowRange> start_upload(const float* host, const Matrix& z, RowRange rows,
                                       LayerTiming& t);
    void finish_upload(const std::vector<RowRange>& chunks, const Matrix& z, StreamedSpmm* scale,
                       LayerTiming& t);
    void plan_fusion();
    std::int64_t streamed_max_nnz(const Csr* a) const;
    bool scales_input(const Csr* op) const;
    Matrix host_matrix(std::int64_t rows, std::int64_t cols, int slot);
    void down(const Matrix& m, float* host, LayerTiming& t);

    StepContext& ctx_;
    Backend& backend_;
    HaloExchanger& exchanger_;
    const Shard& shard_;
    const Model& model_;
    std::int64_t limit_ = 0;     // what the blocks may use: the limit less reserved_
    std::int64_t reserved_ = 0;  // the exchanger's staging (HaloExchanger::staging_bytes)
    std::int64_t n_owned_ = 0;
    std::int64_t n_total_ = 0;
    std::int64_t resident_ = 0;  // weights
    std::int64_t minimum_ = 0;
    std::vector<std::unique_ptr<BlockStep>> steps_;  // each layer's, from its LayerKind
    std::vector<LayerPlan> plans_;
    // fused_[l]: layer l's aggregation blocks also compute layer l + 1's transform (z = x W of
    // their output rows) and send those rows down instead of their output (plan_fusion).
    std::vector<bool> fused_;
    // The rows of the next layer's z that a fused layer kept on the backend (its last
    // plans_[l].keep_rows owned rows), read by the next layer once, then released.
    Matrix kept_;
    // The streamed operator of each distinct operator a resident layer aggregates with (made
    // once: the CUDA backend page-locks the operator for its lifetime).
    std::map<const Csr*, std::unique_ptr<StreamedSpmm>> streamed_;
    // Per operator: the scalings its values factor into, where the backend streams them.
    std::map<const Csr*, std::optional<OperatorScaling>> scalings_;
    const Csr no_block_{};  // BlockRun::block of a streamed block
    double streamed_seconds_ = 0.0;  // making streamed_ (page-locking on the CUDA backend)
    // Host matrices by slot: 0 and 1 a layer's input and output in turn, then z, then the
    // gathered rows of a block, then the z rows of fused layers (4 and 5 in turn: one layer
    // reads one while its blocks write the other).
    static constexpr int kTransformSlot = 2;
    static constexpr int kStagingSlot = 3;
    static constexpr int kFusedSlot = 4;
    std::array<std::shared_ptr<Matrix>, 6> host_cache_;
    std::vector<std::int64_t> stamp_;  // per local column: the block that last counted it
    std::int64_t stamp_id_ = 0;
    MemoryReport report_;
};

}  // namespace halo::detail
