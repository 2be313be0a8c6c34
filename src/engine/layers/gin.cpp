// gin (PyG GINConv with a 2-layer MLP): h = act(MLP((1 + eps) x + sum_N(x))),
// MLP(z) = relu(z W + b) W2 + b2; the first GEMM comes before the sum when it narrows the rows.
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class GinStep final : public SpmmStep {
public:
    using SpmmStep::SpmmStep;

    // The MLP's input in buffer b, its hidden rows in c, the output in a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto in_w = layer_.in_dim;
        const auto hid = layer_.hidden_dim;
        const float self = 1.0f + layer_.eps;
        const auto x = ctx.owned(buf.in, in_w);
        const auto hidden = ctx.owned(buf.c, hid);
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(kind_, op_, ctx.all(buf.in, in_w), ctx.all(buf.b, in_w), t);
            ctx.timed(t, [&] {
                ctx.backend.axpby(self, x, 1.0f, ctx.owned(buf.b, in_w));
                ctx.gemm(ctx.owned(buf.b, in_w), weight_.view(), hidden);
            });
        } else {
            ctx.timed(t, [&] { ctx.gemm(x, weight_.view(), ctx.owned(buf.b, hid)); });
            ctx.aggregate(op_, ctx.all(buf.b, hid), ctx.all(buf.c, hid), t);
            ctx.timed(t, [&] { ctx.backend.axpby(self, ctx.owned(buf.b, hid), 1.0f, hidden); });
        }
        ctx.timed(t, [&] {
            const auto out = ctx.owned(buf.a, layer_.out_dim);
            ctx.backend.bias_activation(hidden, bias_.data(), Activation::relu, {0, ctx.n_owned});
            ctx.gemm(hidden, weight2_.view(), out);
            ctx.backend.bias_activation(out, bias2_.data(), layer_.activation, {0, ctx.n_owned});
        });
        return buf.a;
    }
};

}  // namespace

const LayerKind gin_kind{LayerType::gin, Aggregation::sum, AttentionPattern::none, false,
                         make_step<GinStep>};

}  // namespace halo::detail
