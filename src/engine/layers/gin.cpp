// gin (PyG GINConv with a 2-layer MLP): h = act(MLP((1 + eps) x + sum_N(x))),
// MLP(z) = relu(z W + b) W2 + b2; the first GEMM comes before the sum when it narrows the rows.
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class GinStep final : public LayerStep {
public:
    GinStep(const Layer& layer, StepContext& ctx)
        : layer_(layer),
          op_(ctx.spmm(Aggregation::sum)),
          weight_(
              ctx.upload(layer.weight, layer.weight.empty() ? 0 : layer.in_dim, layer.hidden_dim)),
          bias_(ctx.upload(layer.bias, 1, layer.bias.empty() ? 0 : layer.hidden_dim)),
          weight2_(ctx.upload(layer.weight2, layer.weight2.empty() ? 0 : layer.hidden_dim,
                              layer.out_dim)),
          bias2_(ctx.upload(layer.bias2, 1, layer.bias2.empty() ? 0 : layer.out_dim))
    {
    }

    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto n_owned = ctx.n_owned;
        const auto n_total = ctx.n_total;
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        const auto hid = layer_.hidden_dim;
        const float self = 1.0f + layer_.eps;
        const auto x = ctx.view(buf.in, n_owned, in_w);
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(Aggregation::sum, op_, ctx.view(buf.in, n_total, in_w),
                                ctx.view(buf.b, n_total, in_w), t);
            ctx.timed(t, [&] {
                ctx.backend.axpby(self, x, 1.0f, ctx.view(buf.b, n_owned, in_w));
                ctx.backend.gemm(ctx.view(buf.b, n_owned, in_w), weight_.view(),
                                 ctx.view(buf.c, n_owned, hid), 1.0f, 0.0f);
            });
        } else {
            ctx.timed(t, [&] {
                ctx.backend.gemm(x, weight_.view(), ctx.view(buf.b, n_owned, hid), 1.0f, 0.0f);
            });
            ctx.aggregate(op_, ctx.view(buf.b, n_total, hid), ctx.view(buf.c, n_total, hid), t);
            ctx.timed(t, [&] {
                ctx.backend.axpby(self, ctx.view(buf.b, n_owned, hid), 1.0f,
                                  ctx.view(buf.c, n_owned, hid));
            });
        }
        ctx.timed(t, [&] {
            const auto hidden = ctx.view(buf.c, n_owned, hid);
            const auto out = ctx.view(buf.a, n_owned, out_w);
            ctx.backend.bias_activation(hidden, bias_.data(), Activation::relu, {0, n_owned});
            ctx.backend.gemm(hidden, weight2_.view(), out, 1.0f, 0.0f);
            ctx.backend.bias_activation(out, bias2_.data(), layer_.activation, {0, n_owned});
        });
        return buf.a;
    }

    void add_memory(MemoryReport& r, bool&) const override
    {
        add_weights(r, {&weight_, &bias_, &weight2_, &bias2_});
    }

private:
    const Layer& layer_;
    SpmmPlan& op_;
    Matrix weight_, bias_, weight2_, bias2_;
};

}  // namespace

std::unique_ptr<LayerStep> make_gin_step(const Layer& layer, StepContext& ctx)
{
    return std::make_unique<GinStep>(layer, ctx);
}

}  // namespace halo::detail
