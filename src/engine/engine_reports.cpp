// Engine::Impl's memory (the in-memory estimate that chooses row blocks, the report as
// allocated), the start of the row-block driver, and the engine's reports.
#include <algorithm>
#include <map>

#include "engine_impl.hpp"
#include "halo/core/error.hpp"
#include "halo/core/layer_type.hpp"

namespace halo {

bool Engine::Impl::use_row_blocks() const
{
    switch (options.execution) {
        case Execution::in_memory:
            return false;
        case Execution::row_blocks:
            if (memory_limit <= 0) {
                HALO_THROW(InputError, "row-block execution needs a device memory limit (the ",
                           ctx.backend.name(), " backend has no default)");
            }
            return true;
        case Execution::automatic:
            break;
    }
    return memory_limit > 0 && in_memory_estimate().total() > memory_limit;
}

void Engine::Impl::start_row_blocks()
{
    if (options.replay) {
        options.replay = false;  // nothing to record: the blocks' plans live one block long
        replay_note = "out of core";
    }
    std::vector<const Csr*> ops;
    for (const auto& layer : model.layers) {
        const auto& kind = detail::layer_kind(layer.type);
        ops.push_back(kind.aggregation ? &ctx.operator_matrix(*kind.aggregation)
                      : kind.attention == detail::AttentionPattern::self_loops
                          ? &ctx.self_loop_matrix()
                          : nullptr);
    }
    row_blocks = std::make_unique<detail::RowBlockDriver>(ctx, std::move(ops), memory_limit);
}

MemoryReport Engine::Impl::in_memory_estimate() const
{
    MemoryReport r;
    std::map<std::string, std::int64_t> patterns;  // distinct operators and their nonzeros
    const auto n_owned = ctx.n_owned;
    const auto nnz = ctx.shard.csr.nnz();
    bool two_buffers = true;
    for (const auto& layer : model.layers) {
        const auto& kind = detail::layer_kind(layer.type);
        if (kind.aggregation) {
            patterns[to_string(*kind.aggregation)] =
                nnz + (*kind.aggregation == Aggregation::gcn ? n_owned : 0);
        } else if (kind.attention == detail::AttentionPattern::self_loops) {
            patterns["self_loops"] = nnz + n_owned;
        } else if (kind.attention == detail::AttentionPattern::adjacency) {
            patterns["adjacency"] = nnz;
        }
        two_buffers = two_buffers && kind.two_buffers;
        // Every parameter of the layer's type (halo/core/layer_type.hpp) as the model holds it;
        // the steps' device forms differ a little (gat's attention vectors as [out, heads]
        // block-diagonal matrices, the transformer's missing biases as zeros).
        r.weights += parameter_bytes(layer);
    }
    // Split overlap: the SpMM operators once more, as their local and halo columns, and
    // one n_owned x D buffer of halo sums per operator (an upper bound: a halo plan that adds
    // in place, as the cost model's do where Accel-GCN is not among their kernels, needs none).
    const bool split = ctx.split_overlap();
    const auto width = std::max<std::int64_t>(model.buffer_width(), 1);
    for (const auto& [name, count] : patterns) {
        const int copies = split && name != "self_loops" && name != "adjacency" ? 2 : 1;
        r.row_pointers += 8 * (n_owned + 1) * (copies == 2 ? 3 : 1);
        r.indices += 4 * count * copies;
        r.values += 4 * count * copies;
        r.nonzeros += count;
        r.feature_buffers += copies == 2 ? 4 * n_owned * width : 0;
    }
    r.feature_buffers += (two_buffers ? 2 : 4) * 4 * ctx.n_total * width;
    // 16-bit activations stored in 16 bits: the fp32 scratch of the owned rows
    // (StepContext::scratch; the buffers keep their fp32 size, an upper bound).
    if (options.activations != FeatureType::fp32 && options.store_16bit &&
        ctx.backend.stores_16bit()) {
        r.feature_buffers += 4 * n_owned * std::max<std::int64_t>(model.max_dim(), 1);
    }
    r.limit = memory_limit;
    return r;
}

MemoryReport Engine::Impl::in_memory_report() const
{
    MemoryReport r;
    ctx.add_memory(r);
    bool gcn_pattern_counted = ctx.spmm_plans().count(Aggregation::gcn) != 0;
    for (const auto& step : steps) {
        step->add_memory(r, gcn_pattern_counted);
    }
    r.limit = memory_limit;
    return r;
}

MemoryReport Engine::memory_report() const
{
    return impl_->row_blocks ? impl_->row_blocks->memory_report() : impl_->in_memory_report();
}

std::string Engine::kernel_report() const
{
    std::string out;
    if (impl_->row_blocks) {
        out += impl_->row_blocks->report();
    }
    // Each line names its operator: a model may aggregate with more than one. The first says
    // which kernel the plan runs, the rest what it decided.
    for (const auto& [kind, plan] : impl_->ctx.spmm_plans()) {
        out += std::string(to_string(kind)) + " operator: " + plan->algorithm() + "\n";
        const auto report = plan->report();
        std::size_t pos = 0;
        while (pos < report.size()) {
            auto end = report.find('\n', pos);
            end = end == std::string::npos ? report.size() : end;
            out +=
                std::string(to_string(kind)) + " operator, " + report.substr(pos, end - pos) + "\n";
            pos = end + 1;
        }
    }
    for (std::size_t l = 0; l < impl_->steps.size(); ++l) {
        out += impl_->steps[l]->report(l);
    }
    if (const auto* att = impl_->ctx.attention_plan(detail::AttentionPattern::self_loops)) {
        out += "attention over A + I (agnn, gat): " + att->algorithm() + "\n";
    }
    if (const auto* att = impl_->ctx.attention_plan(detail::AttentionPattern::adjacency)) {
        out += "attention over A (transformer): " + att->algorithm() + "\n";
    }
    if (!impl_->sparse_note.empty()) {
        out += impl_->sparse_note + "\n";
    }
    if (impl_->options.replay) {
        out += impl_->recorded ? std::string("forward pass recorded once and replayed\n")
                               : "forward pass not recorded: " +
                                     (impl_->replay_note.empty()
                                          ? std::string("needs one part, no step timing, no "
                                                        "kept layers, and a second run")
                                          : impl_->replay_note) +
                                     "\n";
    }
    return out;
}

double Engine::operator_seconds() const
{
    return impl_->ctx.operator_seconds();
}

double Engine::tuning_seconds() const
{
    double total = 0.0;
    for (const auto& [kind, plan] : impl_->ctx.spmm_plans()) {
        total += plan->tuning_seconds();
    }
    return total;
}

std::vector<KernelMetadata> Engine::tuning_metadata() const
{
    std::vector<KernelMetadata> out;
    for (const auto& [kind, plan] : impl_->ctx.spmm_plans()) {
        for (auto& md : plan->tuning_metadata()) {
            // mean and sum share the adjacency pattern: one entry per (kernel, operator).
            const bool seen = std::any_of(out.begin(), out.end(), [&](const KernelMetadata& o) {
                return o.kernel == md.kernel && o.op == md.op;
            });
            if (!seen) {
                out.push_back(std::move(md));
            }
        }
    }
    return out;
}

}  // namespace halo
