// gcn (PyG GCNConv): h = act(A_gcn x W + b), aggregating first when the input is the narrower.
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class GcnStep final : public LayerStep {
public:
    GcnStep(const Layer& layer, StepContext& ctx)
        : layer_(layer),
          op_(ctx.spmm(Aggregation::gcn)),
          weight_(ctx.upload(layer.weight, layer.weight.empty() ? 0 : layer.in_dim, layer.out_dim)),
          bias_(ctx.upload(layer.bias, 1, layer.bias.empty() ? 0 : layer.out_dim))
    {
    }

    // In place: x is dead once aggregated or transformed, so the output takes its buffer and the
    // intermediate the first free one: a gcn model runs in two buffers of n_total x max_dim.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto n_owned = ctx.n_owned;
        const auto n_total = ctx.n_total;
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        const int mid = buf.a;
        const int out = buf.in;
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(Aggregation::gcn, op_, ctx.view(buf.in, n_total, in_w),
                                ctx.view(mid, n_total, in_w), t);
            ctx.timed(t, [&] {
                ctx.backend.gemm(ctx.view(mid, n_owned, in_w), weight_.view(),
                                 ctx.view(buf.in, n_owned, out_w), 1.0f, 0.0f);
            });
        } else {
            ctx.timed(t, [&] {
                ctx.backend.gemm(ctx.view(buf.in, n_owned, in_w), weight_.view(),
                                 ctx.view(mid, n_owned, out_w), 1.0f, 0.0f);
            });
            ctx.aggregate(op_, ctx.view(mid, n_total, out_w), ctx.view(buf.in, n_total, out_w), t);
        }
        ctx.timed(t, [&] {
            ctx.backend.bias_activation(ctx.view(out, n_owned, out_w), bias_.data(),
                                        layer_.activation, {0, n_owned});
        });
        return out;
    }

    void add_memory(MemoryReport& r, bool&) const override { add_weights(r, {&weight_, &bias_}); }

private:
    const Layer& layer_;
    SpmmPlan& op_;
    Matrix weight_, bias_;
};

}  // namespace

std::unique_ptr<LayerStep> make_gcn_step(const Layer& layer, StepContext& ctx)
{
    return std::make_unique<GcnStep>(layer, ctx);
}

}  // namespace halo::detail
