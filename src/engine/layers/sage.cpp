// sage (PyG SAGEConv, mean aggregation): h = act(x W_root + mean_N(x) W + b).
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class SageStep final : public LayerStep {
public:
    SageStep(const Layer& layer, StepContext& ctx)
        : layer_(layer),
          op_(ctx.spmm(Aggregation::mean)),
          weight_(ctx.upload(layer.weight, layer.weight.empty() ? 0 : layer.in_dim, layer.out_dim)),
          bias_(ctx.upload(layer.bias, 1, layer.bias.empty() ? 0 : layer.out_dim)),
          root_weight_(ctx.upload(layer.root_weight, layer.in_dim, layer.out_dim))
    {
    }

    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto n_owned = ctx.n_owned;
        const auto n_total = ctx.n_total;
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        const auto x = ctx.view(buf.in, n_owned, in_w);
        const auto out = ctx.view(buf.a, n_owned, out_w);
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(Aggregation::mean, op_, ctx.view(buf.in, n_total, in_w),
                                ctx.view(buf.b, n_total, in_w), t);
            ctx.timed(t, [&] {
                ctx.backend.gemm(x, root_weight_.view(), out, 1.0f, 0.0f);
                ctx.backend.gemm(ctx.view(buf.b, n_owned, in_w), weight_.view(), out, 1.0f, 1.0f);
            });
        } else {
            ctx.timed(t, [&] {
                ctx.backend.gemm(x, weight_.view(), ctx.view(buf.b, n_owned, out_w), 1.0f, 0.0f);
                ctx.backend.gemm(x, root_weight_.view(), out, 1.0f, 0.0f);
            });
            ctx.aggregate(op_, ctx.view(buf.b, n_total, out_w), ctx.view(buf.c, n_total, out_w), t);
            ctx.timed(t,
                      [&] { ctx.backend.axpby(1.0f, ctx.view(buf.c, n_owned, out_w), 1.0f, out); });
        }
        ctx.timed(t, [&] {
            ctx.backend.bias_activation(out, bias_.data(), layer_.activation, {0, n_owned});
        });
        return buf.a;
    }

    void add_memory(MemoryReport& r, bool&) const override
    {
        add_weights(r, {&weight_, &bias_, &root_weight_});
    }

private:
    const Layer& layer_;
    SpmmPlan& op_;
    Matrix weight_, bias_, root_weight_;
};

}  // namespace

std::unique_ptr<LayerStep> make_sage_step(const Layer& layer, StepContext& ctx)
{
    return std::make_unique<SageStep>(layer, ctx);
}

}  // namespace halo::detail
