// linear (torch Linear): h = act(x W + b), no aggregation and no exchange.
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class LinearStep final : public WeightedStep {
public:
    LinearStep(const Layer& layer, StepContext& ctx)
        : WeightedStep(layer, ctx, ctx.options.activations)
    {
    }

    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto out = ctx.owned(buf.a, layer_.out_dim);
        if (ctx.packed() && !ctx.last_layer()) {
            // In 16 bits: the GEMM's fp32 sums, then the stores fused with the bias.
            const auto sums = ctx.scratch(ctx.n_owned, layer_.out_dim);
            ctx.timed(t, [&] {
                ctx.gemm_features(ctx.fview(buf.in, ctx.n_owned, layer_.in_dim), w_.weight,
                                  feature_view(sums));
                ctx.store_features(sums, w_.bias, layer_.activation,
                                   ctx.fview(buf.a, ctx.n_owned, layer_.out_dim));
            });
            return buf.a;
        }
        if (ctx.packed()) {  // the last layer: fp32 output from 16-bit input
            ctx.timed(t, [&] {
                ctx.gemm_features(ctx.fview(buf.in, ctx.n_owned, layer_.in_dim), w_.weight,
                                  feature_view(out));
            });
            ctx.activate(t, out, w_.bias, layer_.activation);
            return buf.a;
        }
        ctx.timed(t, [&] { ctx.gemm(ctx.owned(buf.in, layer_.in_dim), w_.weight.view(), out); });
        ctx.store_output(out);
        ctx.activate(t, out, w_.bias, layer_.activation);
        ctx.store_output(out);
        return buf.a;
    }
};

// Out of core the transform phase is the whole layer.
class LinearBlocks final : public BlockStep {
public:
    using BlockStep::BlockStep;
    void transform_epilogue(Backend& backend, DenseView<float> z, std::int64_t rows) const override
    {
        backend.bias_activation(z, w_.bias.data(), layer_.activation, {0, rows});
    }
};

}  // namespace

const LayerKind linear_kind{.type = LayerType::linear,
                            .packs_16bit = true,
                            .make = make_step<LinearStep>,
                            .make_blocks = make_block_step<LinearBlocks>};

}  // namespace halo::detail
