// gcn (PyG GCNConv): h = act(A_gcn x W + b), aggregating first when the input is the narrower.
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class GcnStep final : public SpmmStep {
public:
    using SpmmStep::SpmmStep;

    // In place: x is dead once aggregated or transformed, so the output takes its buffer and the
    // intermediate the first free one: a gcn model runs in two buffers of n_total x max_dim.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(kind_, op_, ctx.all(buf.in, in_w), ctx.all(buf.a, in_w), t);
            ctx.timed(t, [&] {
                ctx.gemm(ctx.owned(buf.a, in_w), weight_.view(), ctx.owned(buf.in, out_w));
            });
        } else {
            ctx.timed(t, [&] {
                ctx.gemm(ctx.owned(buf.in, in_w), weight_.view(), ctx.owned(buf.a, out_w));
            });
            ctx.aggregate(op_, ctx.all(buf.a, out_w), ctx.all(buf.in, out_w), t);
        }
        ctx.activate(t, ctx.owned(buf.in, out_w), bias_, layer_.activation);
        return buf.in;
    }
};

}  // namespace

const LayerKind gcn_kind{LayerType::gcn, Aggregation::gcn, AttentionPattern::none, true,
                         make_step<GcnStep>};

}  // namespace halo::detail
