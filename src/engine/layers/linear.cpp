// linear (torch Linear): h = act(x W + b), no aggregation and no exchange.
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class LinearStep final : public LayerStep {
public:
    LinearStep(const Layer& layer, StepContext& ctx)
        : layer_(layer),
          weight_(ctx.upload(layer.weight, layer.weight.empty() ? 0 : layer.in_dim, layer.out_dim)),
          bias_(ctx.upload(layer.bias, 1, layer.bias.empty() ? 0 : layer.out_dim))
    {
    }

    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto out = ctx.view(buf.a, ctx.n_owned, layer_.out_dim);
        ctx.timed(t, [&] {
            ctx.backend.gemm(ctx.view(buf.in, ctx.n_owned, layer_.in_dim), weight_.view(), out,
                             1.0f, 0.0f);
        });
        ctx.timed(t, [&] {
            ctx.backend.bias_activation(out, bias_.data(), layer_.activation, {0, ctx.n_owned});
        });
        return buf.a;
    }

    void add_memory(MemoryReport& r, bool&) const override { add_weights(r, {&weight_, &bias_}); }

private:
    const Layer& layer_;
    Matrix weight_, bias_;
};

}  // namespace

std::unique_ptr<LayerStep> make_linear_step(const Layer& layer, StepContext& ctx)
{
    return std::make_unique<LinearStep>(layer, ctx);
}

}  // namespace halo::detail
