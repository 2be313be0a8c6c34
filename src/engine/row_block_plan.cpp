// RowBlockDriver's planning half (row_block_driver.hpp): each layer's costs, the row blocks that
// fit the memory limit, the fusion of consecutive layers, and the plan's report. The execution
// half is row_block_driver.cpp.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "halo/core/error.hpp"
#include "layer_step.hpp"
#include "row_block_driver.hpp"

namespace halo::detail {
namespace {

constexpr std::int64_t f32 = sizeof(float);
// Blocks' worth of backend memory a resident aggregation holds at a time (split_layer).
constexpr std::int64_t kHeldBlocks = 3;
// A streamed layer runs at least this many blocks (of at least kMinBlockNonzeros each): the
// first block's operator rows arrive before any compute and the last block's output leaves
// after all of it, so the pipeline's fill and drain are a block's worth each.
constexpr std::int64_t kMinStreamedBlocks = 32;
constexpr std::int64_t kMinBlockNonzeros = std::int64_t{1} << 22;
// The share of a fused layer's block budget that may keep rows of the next z on the backend
// (plan_fusion): the blocks get smaller, and each kept row saves its way down and up again.
constexpr std::int64_t kKeepShareNum = 3;
constexpr std::int64_t kKeepShareDen = 4;

std::int64_t scaling_bytes(const std::optional<OperatorScaling>& s)
{
    return s ? f32 * static_cast<std::int64_t>(s->row.size() + s->col.size()) : 0;
}

}  // namespace

RowBlockDriver::RowBlockDriver(StepContext& ctx, std::vector<const Csr*> layer_operators,
                               std::int64_t limit)
    : ctx_(ctx),
      backend_(ctx.backend),
      exchanger_(ctx.exchanger),
      shard_(ctx.shard),
      model_(ctx.model),
      reserved_(ctx.has_peers ? ctx.exchanger.staging_bytes() : 0),
      n_owned_(ctx.n_owned),
      n_total_(ctx.n_total),
      stamp_(static_cast<std::size_t>(ctx.n_total), -1)
{
    limit_ = limit - reserved_;
    const auto& model = model_;
    HALO_EXPECTS(layer_operators.size() == model.layers.size(), "one operator per layer");
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        const auto type = model.layers[l].type;
        const auto& kind = layer_kind(type);
        if (kind.make_blocks == nullptr) {
            HALO_THROW(InputError, "layer ", l, " (", to_string(type),
                       ") cannot run out of core (row blocks run ", out_of_core_types(),
                       " layers); raise --device-memory-limit or use more ranks");
        }
        if (kind.aggregation || kind.attention != AttentionPattern::none) {
            HALO_EXPECTS(layer_operators[l] != nullptr, "layer ", l, " has no operator");
        }
    }
    // The layers' steps over blocks; their weights stay resident.
    for (const auto& layer : model.layers) {
        steps_.push_back(layer_kind(layer.type).make_blocks(layer, backend_));
        resident_ += steps_.back()->resident_bytes();
    }
    plans_.resize(model.layers.size());
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        plans_[l].op = layer_operators[l];
        scalings_.emplace(layer_operators[l], std::nullopt);
    }
    const auto weights = resident_;
    plan_all();
    // An operator that a resident layer streams and whose values are scalings of its pattern
    // streams the pattern alone where the backend can (the CUDA backend; the CPU backend keeps
    // the values, bit for bit) and EngineOptions::operator_stream asks for it; its scalings then
    // stay on the device for the whole run: plan again with them resident, and without them if
    // the limit does not allow it.
    const auto mode = ctx_.options.operator_stream;
    std::map<const Csr*, std::optional<OperatorScaling>> scaled;
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        const auto& p = plans_[l];
        const auto kind = layer_kind(model.layers[l].type).aggregation;
        if (mode != OperatorStream::values && backend_.streams_scaled_operators() &&
            p.op != nullptr && !p.compact && kind && !scaled.contains(p.op)) {
            auto s = ctx.operator_scaling(*kind);
            // automatic: only where no c_j is gathered per nonzero (row scaling alone, or z
            // scaled by the column scaling: see the streamed operators below).
            if (s && (mode == OperatorStream::pattern || s->col.empty() || scales_input(p.op))) {
                scaled.emplace(p.op, std::move(s));
            }
        }
    }
    if (!scaled.empty()) {
        auto unscaled = plans_;
        for (auto& [op, s] : scaled) {
            resident_ += scaling_bytes(s);
            scalings_[op] = std::move(s);
        }
        try {
            plan_all();
        } catch (const InputError&) {  // the scalings do not fit beside the weights: values
            resident_ = weights;
            for (auto& [op, s] : scalings_) {
                s.reset();
            }
            plans_ = std::move(unscaled);
        }
    }
    report_ = {};
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        report_layer(l);
        const auto& p = plans_[l];
        if (p.op != nullptr && !p.compact && !streamed_.contains(p.op)) {
            SpmmPlanHints hints;
            hints.op = std::string(steps_[l]->spmm_operator());
            const auto t0 = std::chrono::steady_clock::now();
            const auto& scaling = scalings_.at(p.op);
            streamed_.emplace(
                p.op, backend_.make_streamed_spmm(*p.op, hints, scaling ? &*scaling : nullptr,
                                                  scaling.has_value() && scales_input(p.op)));
            streamed_seconds_ += seconds_since(t0);
        }
    }
}

// Whether z's rows may be scaled by op's column scaling once per layer instead of a gather of c_j
// per nonzero: where no exchange writes z's halo rows (one part, or no peers) and every resident
// layer of this operator reads z through its SpMM alone.
bool RowBlockDriver::scales_input(const Csr* op) const
{
    bool ok = !ctx_.has_peers;
    for (std::size_t m = 0; m < plans_.size(); ++m) {
        if (plans_[m].op == op && !plans_[m].compact) {
            ok = ok && steps_[m]->fuses_transform();
        }
    }
    return ok;
}

// Every layer's costs and blocks; a limit below the smallest that runs them all is an error
// naming the smallest.
void RowBlockDriver::plan_all()
{
    const auto& model = model_;
    minimum_ = 0;
    std::size_t worst = 0;
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        plan_layer(l);
        if (plans_[l].need > minimum_) {
            minimum_ = plans_[l].need;
            worst = l;
        }
    }
    if (minimum_ > limit_) {
        const auto& p = plans_[worst];
        const auto smallest = minimum_ + reserved_;
        HALO_THROW(InputError, "device memory limit of ", format_bytes(limit_ + reserved_), " (",
                   limit_ + reserved_, " bytes) is too small to run layer ", worst, " (",
                   to_string(model.layers[worst].type), ") over row blocks: ",
                   p.worst_row >= 0 ? "its largest row (row " + std::to_string(p.worst_row) + ", " +
                                          std::to_string(p.worst_nnz) + " nonzeros)"
                                    : std::string("one row"),
                   " needs ", format_bytes(minimum_), " with the weights",
                   reserved_ > 0
                       ? detail::concat(", and the halo exchange's staging buffer ",
                                        format_bytes(reserved_), " (--nccl-register off frees it)")
                       : std::string(),
                   "; the smallest limit that works is ", format_bytes(smallest),
                   " (--device-memory-limit ", smallest, ")");
    }
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        split_layer(l);
    }
    plan_fusion();
}

// Layer l's resident aggregation blocks take layer l + 1's transform where both keep z resident
// and layer l + 1 transforms first with a step that reads only z: each block then also holds its
// rows of the next z (kHeldBlocks blocks at a time, as its output rows), and is split again.
void RowBlockDriver::plan_fusion()
{
    const auto n = plans_.size();
    fused_.assign(n, false);
    for (auto& p : plans_) {
        p.keep_rows = 0;
    }
    for (std::size_t l = 0; l + 1 < n; ++l) {
        auto& p = plans_[l];
        const auto& q = plans_[l + 1];
        if (p.op == nullptr || p.compact || q.op == nullptr || q.compact || q.agg_first ||
            !steps_[l + 1]->fuses_transform()) {
            continue;
        }
        Cost agg = p.agg;
        agg.per_row += kHeldBlocks * f32 * q.wz;
        std::int64_t worst = 0;
        for (std::int64_t i = 0; i < n_owned_; ++i) {
            worst = std::max(worst, agg.bytes(1, p.op->row_nnz(i), 0));
        }
        if (worst > limit_) {
            continue;  // not one row more: unfused
        }
        // The last rows of the next z stay on the backend, as many as take at most
        // kKeepShareNum / kKeepShareDen of what the blocks may use beside z (never the room of
        // the costliest row), and as fit beside all of the next z when layer l + 1 starts (it
        // copies them into its z, then releases them).
        const auto row_bytes = f32 * q.wz;
        const auto share = (limit_ - agg.fixed) / kKeepShareDen * kKeepShareNum;
        const auto keep = std::min({n_owned_, std::max<std::int64_t>(share, 0) / row_bytes,
                                    (limit_ - worst) / row_bytes,
                                    std::max<std::int64_t>(limit_ - q.agg.fixed, 0) / row_bytes});
        agg.fixed += row_bytes * keep;
        p.agg = agg;
        p.keep_rows = keep;
        p.agg_blocks = split(p.op, p.agg, false, streamed_max_nnz(p.op));
        fused_[l] = true;
    }
}

// The most nonzeros of a streamed block: one 32-bit cuSPARSE descriptor, and at most a
// kMinStreamedBlocks-th of the operator (but not below kMinBlockNonzeros).
std::int64_t RowBlockDriver::streamed_max_nnz(const Csr* a) const
{
    const auto share = (a->nnz() + kMinStreamedBlocks - 1) / kMinStreamedBlocks;
    return std::min<std::int64_t>(std::numeric_limits<std::int32_t>::max(),
                                  std::max(share, kMinBlockNonzeros));
}

// Costs of the layer's phases, the smallest limit that runs it, then its blocks.
void RowBlockDriver::plan_layer(std::size_t l)
{
    const auto& step = *steps_[l];
    auto& p = plans_[l];
    p.agg_first = step.aggregate_first();
    p.wz = step.z_width();
    if (!p.agg_first) {
        p.pre.fixed = resident_;
        p.pre.per_row = f32 * (model_.layers[l].in_dim + p.wz);
    }
    if (p.op != nullptr) {
        auto& c = p.agg;
        // Row offsets as 8 bytes and 4 more for a narrowed copy (cuSPARSE's upload); a value per
        // nonzero even for a pattern operator (cuSPARSE reads an array of ones).
        c.fixed = resident_ + 12;  // the block's last row offset
        c.per_nnz = 8;
        c.per_row = 12 + f32 * (model_.layers[l].out_dim + step.row_floats());
        c.per_col = f32 * p.wz + step.col_bytes();
    }
    // The smallest limit: the costliest single row of either phase (distinct columns of a row =
    // its nonzeros: a shard's rows hold no duplicate column).
    p.need = p.agg_first ? 0 : p.pre.bytes(1, 0, 0);
    if (p.op != nullptr) {
        for (std::int64_t i = 0; i < n_owned_; ++i) {
            const auto nnz = p.op->row_nnz(i);
            const auto bytes = p.agg.bytes(1, nnz, nnz);
            if (bytes > p.need) {
                p.need = bytes;
                p.worst_row = i;
                p.worst_nnz = nnz;
            }
        }
    }
}

// Blocks of the layer's phases within the limit, and the largest block's report.
void RowBlockDriver::split_layer(std::size_t l)
{
    const auto& step = *steps_[l];
    auto& p = plans_[l];
    if (p.op != nullptr) {
        // All of z resident when it takes at most three quarters of what the weights leave:
        // fewer copies and no gathering on the host (each row of z goes up once per layer instead
        // of once per block that references it; on a power-law graph most blocks reference most
        // rows; the transform writes z where it stays), at the price of smaller blocks. The
        // aggregation then holds up to three blocks' worth at a time (the one running, the next
        // one's operator rows on their way up, the previous one's output on its way down): each
        // block's rows and nonzeros count three times, so that any three blocks fit beside z.
        // The transform's x rows go up once per block.
        const auto z_bytes = f32 * n_total_ * p.wz;
        p.compact = !(step.z_may_stay() && 4 * z_bytes <= 3 * (limit_ - p.agg.fixed));
        if (!p.compact) {
            // Streamed: a value per nonzero on the device whether copied or made there (the
            // scalings, where made, are in resident_).
            Cost agg = p.agg;
            agg.fixed += z_bytes;
            agg.per_row *= kHeldBlocks;
            agg.per_nnz *= kHeldBlocks;
            agg.per_col = 0;
            Cost pre{resident_ + z_bytes, f32 * model_.layers[l].in_dim, 0, 0};
            std::int64_t worst = p.agg_first ? 0 : pre.bytes(1, 0, 0);
            for (std::int64_t i = 0; i < n_owned_; ++i) {
                worst = std::max(worst, agg.bytes(1, p.op->row_nnz(i), 0));
            }
            if (worst <= limit_) {
                p.agg = agg;
                p.pre = pre;
            } else {  // not even one row beside all of z: gather after all
                p.compact = true;
            }
        }
        // A streamed block is one 32-bit cuSPARSE descriptor.
        p.agg_blocks =
            split(p.op, p.agg, p.compact, p.compact ? INT64_MAX : streamed_max_nnz(p.op));
    }
    if (!p.agg_first) {
        p.pre_blocks = split(nullptr, p.pre, false);
    }
}

// The largest block's report so far, by component (the resident scalings under kernel
// metadata), and the run's counts.
void RowBlockDriver::report_layer(std::size_t l)
{
    const auto& step = *steps_[l];
    const auto& p = plans_[l];
    std::int64_t scalings = 0;
    for (const auto& [op, s] : scalings_) {
        scalings += scaling_bytes(s);
    }
    for (const auto* blocks : {&p.pre_blocks, &p.agg_blocks}) {
        for (const auto& b : *blocks) {
            MemoryReport r;
            r.weights = resident_ - scalings;
            r.kernel_metadata = scalings;
            if (blocks == &p.agg_blocks) {
                const std::int64_t held = p.compact ? 1 : kHeldBlocks;
                r.row_pointers = held * 12 * (b.rows.size() + 1);
                r.indices = held * 4 * b.nnz;
                r.values = held * 4 * b.nnz;
                r.kernel_metadata += step.col_metadata_bytes() * b.cols;
            }
            r.feature_buffers = b.bytes - r.total();
            if (r.total() > report_.total()) {
                r.nonzeros = report_.nonzeros;  // the largest block's components, the run's counts
                r.row_blocks = report_.row_blocks;
                report_ = r;
            }
        }
        report_.row_blocks =
            std::max<std::int64_t>(report_.row_blocks, static_cast<std::int64_t>(blocks->size()));
    }
    report_.nonzeros = std::max(report_.nonzeros, p.op != nullptr ? p.op->nnz() : 0);
    report_.out_of_core = true;
    report_.limit = limit_;
}

std::vector<RowBlockDriver::Block> RowBlockDriver::split(const Csr* a, const Cost& cost,
                                                         bool compact, std::int64_t max_nnz)
{
    std::vector<Block> out;
    Block cur;
    ++stamp_id_;
    // Distinct columns of row i not yet counted in the current block (marks them).
    auto new_columns = [&](std::int64_t i) {
        std::int64_t fresh = 0;
        if (a == nullptr || !compact) {
            return fresh;
        }
        for (auto k = a->indptr[i]; k < a->indptr[i + 1]; ++k) {
            auto& s = stamp_[static_cast<std::size_t>(a->indices[k])];
            if (s != stamp_id_) {
                s = stamp_id_;
                ++fresh;
            }
        }
        return fresh;
    };
    for (std::int64_t i = 0; i < n_owned_; ++i) {
        if (a != nullptr && i == shard_.num_interior && !cur.rows.empty()) {
            // Interior rows apart: their blocks run while the halo exchange is in flight.
            out.push_back(cur);
            cur = Block{{i, i}, 0, 0, 0};
            ++stamp_id_;
        }
        const auto nnz = a != nullptr ? a->row_nnz(i) : 0;
        auto fresh = new_columns(i);
        auto bytes = cost.bytes(cur.rows.size() + 1, cur.nnz + nnz, cur.cols + fresh);
        if ((bytes > limit_ || cur.nnz + nnz > max_nnz) && !cur.rows.empty()) {
            out.push_back(cur);
            cur = Block{{i, i}, 0, 0, 0};
            ++stamp_id_;
            fresh = new_columns(i);
            bytes = cost.bytes(1, nnz, fresh);
        }
        HALO_EXPECTS(bytes <= limit_, "row ", i, " alone needs ", bytes, " bytes");
        cur.rows.end = i + 1;
        cur.nnz += nnz;
        cur.cols += fresh;
        cur.bytes = bytes;
    }
    if (!cur.rows.empty()) {
        out.push_back(cur);
    }
    return out;
}


std::string RowBlockDriver::report() const
{
    std::string out;
    for (std::size_t l = 0; l < plans_.size(); ++l) {
        const auto& p = plans_[l];
        out += "layer " + std::to_string(l) + " (" + to_string(model_.layers[l].type) +
               "): out of core, ";
        if (!p.pre_blocks.empty()) {
            out += std::to_string(p.pre_blocks.size()) + " transform blocks, ";
        }
        if (p.op != nullptr) {
            out += std::to_string(p.agg_blocks.size()) + " aggregation blocks, " +
                   (p.compact ? "referenced rows gathered per block" : "all rows resident");
        }
        if (l < fused_.size() && fused_[l]) {
            out += ", layer " + std::to_string(l + 1) +
                   "'s transform fused into its blocks (unless every layer's output is kept)";
            if (p.keep_rows > 0) {
                out += ", the last " + std::to_string(p.keep_rows) + " of its " +
                       std::to_string(n_owned_) + " z rows kept on the backend";
            }
        }
        out += " (limit " + format_bytes(limit_) + ")\n";
    }
    for (const auto& [op, streamed] : streamed_) {
        out += "streamed operator (" + std::to_string(op->nnz()) +
               " nonzeros): " + streamed->algorithm() + "\n";
    }
    if (!streamed_.empty()) {
        out += "streamed operators prepared in " + std::to_string(streamed_seconds_) +
               " s (the CUDA backend page-locks them in place)\n";
    }
    return out;
}

}  // namespace halo::detail
