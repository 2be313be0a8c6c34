// sage (PyG SAGEConv, mean aggregation): h = act(x W_root + mean_N(x) W + b).
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class SageStep final : public SpmmStep {
public:
    using SpmmStep::SpmmStep;

    // The aggregate in buffer b (the transformed rows first, then their aggregate in c), the
    // output in a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        const auto x = ctx.owned(buf.in, in_w);
        const auto out = ctx.owned(buf.a, out_w);
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(kind_, op_, ctx.all(buf.in, in_w), ctx.all(buf.b, in_w), t);
            ctx.timed(t, [&] {
                ctx.gemm(x, root_weight_.view(), out);
                ctx.gemm(ctx.owned(buf.b, in_w), weight_.view(), out, 1.0f);
            });
        } else {
            ctx.timed(t, [&] {
                ctx.gemm(x, weight_.view(), ctx.owned(buf.b, out_w));
                ctx.gemm(x, root_weight_.view(), out);
            });
            ctx.aggregate(op_, ctx.all(buf.b, out_w), ctx.all(buf.c, out_w), t);
            ctx.timed(t, [&] { ctx.backend.axpby(1.0f, ctx.owned(buf.c, out_w), 1.0f, out); });
        }
        ctx.activate(t, out, bias_, layer_.activation);
        return buf.a;
    }
};

}  // namespace

const LayerKind sage_kind{LayerType::sage, Aggregation::mean, AttentionPattern::none, false,
                          make_step<SageStep>};

}  // namespace halo::detail
