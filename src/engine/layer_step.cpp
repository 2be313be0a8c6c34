// What the layer steps share besides the StepContext (layer_step.hpp): uploads, the weights as
// the layer type's table lists them (halo/core/layer_type.hpp), the step bases, and the row-block
// runs' helpers.

#include "layer_step.hpp"

#include "halo/core/error.hpp"
#include "halo/core/layer_type.hpp"

namespace halo::detail {

Matrix upload(Backend& backend, const std::vector<float>& host, std::int64_t rows,
              std::int64_t cols)
{
    if (host.empty() || rows == 0 || cols == 0) {
        return {};
    }
    auto m = backend.allocate(rows, cols);
    backend.copy_from_host(host.data(), m.view());
    return m;
}

Matrix upload_timed(Backend& backend, const float* host, std::int64_t rows, std::int64_t cols,
                    LayerTiming& t)
{
    auto m = backend.allocate(rows, cols);
    if (rows > 0 && cols > 0) {
        const auto t0 = std::chrono::steady_clock::now();
        backend.copy_from_host(host, m.view());
        t.transfer += seconds_since(t0);
        t.transferred_bytes += static_cast<std::int64_t>(sizeof(float)) * rows * cols;
    }
    return m;
}

Matrix block_diagonal(Backend& backend, const std::vector<float>& att, std::int64_t heads)
{
    const auto width = static_cast<std::int64_t>(att.size());
    const auto d = width / heads;
    std::vector<float> host(static_cast<std::size_t>(width * heads), 0.0f);
    for (std::int64_t r = 0; r < width; ++r) {
        host[r * heads + r / d] = att[r];
    }
    return upload(backend, host, width, heads);
}

MemoryReport csr_memory(const Csr& a)
{
    MemoryReport c;
    c.row_pointers = 8 * (a.num_rows + 1);
    c.indices = 4 * a.nnz();
    c.values = 4 * a.nnz();
    c.nonzeros = a.nnz();
    return c;
}

LayerWeights::LayerWeights(const Layer& layer, Backend& backend, FeatureType gemm_type)
{
    for (const auto& a : layer_type_info(layer.type).arrays) {
        const auto& host = a.of(layer);
        if (!a.upload || host.empty()) {
            continue;
        }
        const auto rows = layer_dim(layer, a.rows);
        const auto cols = layer_dim(layer, a.cols);
        const bool gemm_operand =
            a.name == "weight" || a.name == "root_weight" || a.name == "weight2";
        Matrix m;
        if (gemm_operand && gemm_type != FeatureType::fp32) {
            auto rounded = host;  // the 16-bit GEMMs' B: rounded once, as the device stores it
            round_features(rounded, gemm_type);
            m = upload(backend, rounded, rows, cols);
        } else {
            m = upload(backend, host, rows, cols);
        }
        if (a.name == "weight") {
            weight = std::move(m);
        } else if (a.name == "bias") {
            bias = std::move(m);
        } else if (a.name == "root_weight") {
            root_weight = std::move(m);
        } else if (a.name == "weight2") {
            weight2 = std::move(m);
        } else if (a.name == "bias2") {
            bias2 = std::move(m);
        } else {
            other.emplace(std::string(a.name), std::move(m));
        }
    }
}

const Matrix& LayerWeights::get(std::string_view name) const
{
    static const Matrix none;
    const std::pair<std::string_view, const Matrix*> named[] = {
        {"weight", &weight}, {"bias", &bias}, {"root_weight", &root_weight},
        {"weight2", &weight2}, {"bias2", &bias2}};
    for (const auto& [n, m] : named) {
        if (n == name) {
            return *m;
        }
    }
    const auto it = other.find(name);
    return it == other.end() ? none : it->second;
}

WeightedStep::WeightedStep(const Layer& layer, StepContext& ctx, FeatureType gemm_type)
    : layer_(layer), w_(layer, ctx.backend, gemm_type)
{
}

SpmmStep::SpmmStep(const Layer& layer, StepContext& ctx)
    : WeightedStep(layer, ctx, ctx.options.activations), kind_(*layer_kind(layer.type).aggregation), op_(ctx.spmm(kind_))
{
}

AttentionStep::AttentionStep(const Layer& layer, StepContext& ctx)
    : WeightedStep(layer, ctx), attention_(ctx.attention(layer_kind(layer.type).attention))
{
}

SpmmPlanHints BlockRun::hints(std::string_view op) const
{
    SpmmPlanHints h;
    h.op = std::string(op);
    h.ranges = {rows};
    return h;
}

void BlockRun::spmm(std::string_view op, DenseView<float> y)
{
    if (streamed != nullptr) {
        streamed->run({first, first + rows.size()}, src.view(), y);
    } else {
        backend.make_spmm_plan(block, hints(op))->run(src.view(), y, rows);
    }
}

Matrix BlockRun::up_rows(const float* host, std::int64_t cols)
{
    return upload_timed(backend, host + first * cols, rows.size(), cols, t);
}

DenseView<const float> BlockRun::z_rows(Matrix& holder, std::int64_t cols)
{
    if (streamed != nullptr) {
        return src.rows_view(first, first + rows.size());
    }
    holder = up_rows(z, cols);
    return holder.view();
}

void BlockRun::done(double& into)
{
    if (step_timing) {
        backend.synchronize();
        into += seconds_since(t0);
    }
    mark();
}

std::int64_t BlockStep::resident_bytes() const
{
    MemoryReport r;
    w_.add_to(r);
    return r.weights;
}

void BlockStep::aggregate(BlockRun&) const
{
    HALO_THROW(LogicError, "layer type ", to_string(layer_.type), " aggregates nothing");
}

}  // namespace halo::detail
