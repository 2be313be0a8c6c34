// linear (torch Linear): h = act(x W + b), no aggregation and no exchange.
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class LinearStep final : public WeightedStep {
public:
    using WeightedStep::WeightedStep;

    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto out = ctx.owned(buf.a, layer_.out_dim);
        ctx.timed(t, [&] { ctx.gemm(ctx.owned(buf.in, layer_.in_dim), weight_.view(), out); });
        ctx.activate(t, out, bias_, layer_.activation);
        return buf.a;
    }
};

}  // namespace

const LayerKind linear_kind{LayerType::linear, std::nullopt, AttentionPattern::none, false,
                            make_step<LinearStep>};

}  // namespace halo::detail
