// gin (PyG GINConv with a 2-layer MLP): h = act(MLP((1 + eps) x + sum_N(x))),
// MLP(z) = relu(z W + b) W2 + b2; the first GEMM comes before the sum when it narrows the rows.
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class GinStep final : public WeightedStep {
public:
    GinStep(const Layer& layer, StepContext& ctx)
        : WeightedStep(layer, ctx, layer.hidden_dim),
          op_(ctx.spmm(Aggregation::sum)),
          weight2_(ctx.upload(layer.weight2, layer.weight2.empty() ? 0 : layer.hidden_dim,
                              layer.out_dim)),
          bias2_(ctx.upload(layer.bias2, 1, layer.bias2.empty() ? 0 : layer.out_dim))
    {
    }

    // The MLP's input in buffer b, its hidden rows in c, the output in a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto in_w = layer_.in_dim;
        const auto hid = layer_.hidden_dim;
        const float self = 1.0f + layer_.eps;
        const auto x = ctx.owned(buf.in, in_w);
        const auto hidden = ctx.owned(buf.c, hid);
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(Aggregation::sum, op_, ctx.all(buf.in, in_w), ctx.all(buf.b, in_w),
                                t);
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

    void add_memory(MemoryReport& r, bool& gcn_pattern_counted) const override
    {
        WeightedStep::add_memory(r, gcn_pattern_counted);
        add_weights(r, {&weight2_, &bias2_});
    }

private:
    SpmmPlan& op_;
    Matrix weight2_, bias2_;
};

}  // namespace

const LayerKind gin_kind{LayerType::gin, Aggregation::sum, AttentionPattern::none, false,
                         make_step<GinStep>};

}  // namespace halo::detail
