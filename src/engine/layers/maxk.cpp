// maxk (MaxK-GNN, paper 000): z = x W + b, the top-k of each row into the plan's CBSR, the CBSR
// rows exchanged as records, h = act(A_gcn * S) through the plan's SSD operator.
#include "halo/maxk.hpp"

#include "halo/error.hpp"
#include "halo/kernel_metadata.hpp"
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class MaxkStep final : public LayerStep {
public:
    MaxkStep(const Layer& layer, StepContext& ctx)
        : layer_(layer),
          operator_(ctx.operator_matrix(Aggregation::gcn)),
          weight_(ctx.upload(layer.weight, layer.weight.empty() ? 0 : layer.in_dim, layer.out_dim)),
          bias_(ctx.upload(layer.bias, 1, layer.bias.empty() ? 0 : layer.out_dim)),
          n_total_(ctx.n_total)
    {
        if (layer.out_dim > kMaxkMaxDim) {
            HALO_THROW(InputError, "maxk layer of width ", layer.out_dim,
                       ": the MaxK kernels take ", "widths up to ", kMaxkMaxDim);
        }
        plan_ = ctx.backend.make_maxk_plan(operator_, layer.out_dim, layer.k,
                                           ctx.hints_for(kernel_operator_gcn.data()));
    }

    // z in buffer b, the records in buffer c, the output in buffer a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto n_owned = ctx.n_owned;
        const auto out_w = layer_.out_dim;
        auto& plan = *plan_;
        ctx.timed(t, [&] {
            const auto z = ctx.view(buf.b, n_owned, out_w);
            ctx.backend.gemm(ctx.view(buf.in, n_owned, layer_.in_dim), weight_.view(), z, 1.0f,
                             0.0f);
            ctx.backend.bias_activation(z, bias_.data(), Activation::none, {0, n_owned});
            plan.topk(z);
        });
        const auto out = ctx.view(buf.a, n_owned, out_w);
        if (!ctx.has_peers) {
            const auto t0 = std::chrono::steady_clock::now();
            plan.aggregate(out, {0, n_owned});
            if (ctx.options.step_timing) {
                ctx.backend.synchronize();
                t.spmm += seconds_since(t0);
            }
        } else {
            const auto records = ctx.view(buf.c, ctx.n_total, MaxkPlan::record_words(layer_.k));
            ctx.timed(t, [&] { plan.pack({0, n_owned}, records); });
            ctx.exchange_and_compute(
                records, out_w, [&](RowRange rows) { plan.aggregate(out, rows); },
                [&] {
                    plan.unpack(records, {n_owned, ctx.n_total});
                },
                t);
        }
        ctx.timed(t, [&] {
            ctx.backend.bias_activation(out, nullptr, layer_.activation, {0, n_owned});
        });
        return buf.a;
    }

    // Every maxk plan holds the gcn operator (its nonzeros counted once) and a CBSR of k floats
    // and k int16 per row.
    void add_memory(MemoryReport& r, bool& gcn_pattern_counted) const override
    {
        add_weights(r, {&weight_, &bias_});
        auto c = csr_memory(operator_);
        if (gcn_pattern_counted) {
            c.nonzeros = 0;
        }
        gcn_pattern_counted = true;
        c.kernel_metadata = 6 * n_total_ * layer_.k;
        r += c;
    }

    std::string report(std::size_t index) const override
    {
        return "maxk layer " + std::to_string(index) + ": " + plan_->algorithm() + "\n";
    }

private:
    const Layer& layer_;
    const Csr& operator_;
    Matrix weight_, bias_;
    std::int64_t n_total_ = 0;
    std::unique_ptr<MaxkPlan> plan_;
};

}  // namespace

std::unique_ptr<LayerStep> make_maxk_step(const Layer& layer, StepContext& ctx)
{
    return std::make_unique<MaxkStep>(layer, ctx);
}

}  // namespace halo::detail
