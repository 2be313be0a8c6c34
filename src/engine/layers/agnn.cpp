// agnn (PyG AGNNConv after a Linear): z = x W + b (or x without a weight), zn = z / |z| row by
// row (owned rows before the exchange, halo rows after), h = act(softmax(beta zn zn^T on A + I) z).
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class AgnnStep final : public LayerStep {
public:
    AgnnStep(const Layer& layer, StepContext& ctx)
        : layer_(layer),
          attention_(ctx.attention(AttentionPattern::self_loops)),
          weight_(ctx.upload(layer.weight, layer.weight.empty() ? 0 : layer.in_dim, layer.out_dim)),
          bias_(ctx.upload(layer.bias, 1, layer.bias.empty() ? 0 : layer.out_dim))
    {
    }

    // z in buffer b (the input's buffer without a weight), zn in buffer c, the output in a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto n_owned = ctx.n_owned;
        const auto n_total = ctx.n_total;
        const auto d = layer_.out_dim;
        int zb = buf.in;
        if (!layer_.weight.empty()) {
            zb = buf.b;
            ctx.timed(t, [&] {
                ctx.backend.gemm(ctx.view(buf.in, n_owned, layer_.in_dim), weight_.view(),
                                 ctx.view(buf.b, n_owned, d), 1.0f, 0.0f);
                ctx.backend.bias_activation(ctx.view(buf.b, n_owned, d), bias_.data(),
                                            Activation::none, {0, n_owned});
            });
        }
        const auto z = ctx.view(zb, n_total, d);
        const auto zn = ctx.view(buf.c, n_total, d);
        ctx.timed(t, [&] {
            ctx.backend.normalize_rows(ctx.view(zb, n_owned, d), ctx.view(buf.c, n_owned, d));
        });
        const auto out = ctx.view(buf.a, n_owned, d);
        ctx.exchange_and_compute(
            z, d,
            [&](RowRange rows) {
                attention_.run(ctx.view(buf.c, n_owned, d), zn, z, layer_.beta, out, rows);
            },
            [&] {
                ctx.backend.normalize_rows(
                    DenseView<const float>{z.row(n_owned), n_total - n_owned, d, d},
                    DenseView<float>{zn.row(n_owned), n_total - n_owned, d, d});
            },
            t);
        ctx.timed(t, [&] {
            ctx.backend.bias_activation(out, nullptr, layer_.activation, {0, n_owned});
        });
        return buf.a;
    }

    void add_memory(MemoryReport& r, bool&) const override { add_weights(r, {&weight_, &bias_}); }

private:
    const Layer& layer_;
    AttentionPlan& attention_;
    Matrix weight_, bias_;
};

}  // namespace

std::unique_ptr<LayerStep> make_agnn_step(const Layer& layer, StepContext& ctx)
{
    return std::make_unique<AgnnStep>(layer, ctx);
}

}  // namespace halo::detail
