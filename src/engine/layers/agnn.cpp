// agnn (PyG AGNNConv after a Linear): z = x W + b (or x without a weight), zn = z / |z| row by
// row (owned rows before the exchange, halo rows after), h = act(softmax(beta zn zn^T on A + I) z).
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class AgnnStep final : public AttentionStep {
public:
    using AttentionStep::AttentionStep;

    // z in buffer b (the input's buffer without a weight), zn in buffer c, the output in a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto n_owned = ctx.n_owned;
        const auto halo_rows = ctx.n_total - n_owned;
        const auto d = layer_.out_dim;
        int zb = buf.in;
        if (!layer_.weight.empty()) {
            zb = buf.b;
            ctx.timed(t, [&] {
                ctx.gemm(ctx.owned(buf.in, layer_.in_dim), w_.weight.view(), ctx.owned(buf.b, d));
                ctx.backend.bias_activation(ctx.owned(buf.b, d), w_.bias.data(), Activation::none,
                                            {0, n_owned});
            });
        }
        const auto z = ctx.all(zb, d);
        const auto zn = ctx.all(buf.c, d);
        ctx.timed(t, [&] { ctx.backend.normalize_rows(ctx.owned(zb, d), ctx.owned(buf.c, d)); });
        const auto out = ctx.owned(buf.a, d);
        ctx.exchange_and_compute(
            z, d,
            [&](RowRange rows) {
                attention_.run(ctx.owned(buf.c, d), zn, z, layer_.beta, out, rows);
            },
            [&] {
                ctx.backend.normalize_rows(DenseView<const float>{z.row(n_owned), halo_rows, d, d},
                                           DenseView<float>{zn.row(n_owned), halo_rows, d, d});
            },
            t);
        ctx.activate(t, out, Matrix{}, layer_.activation);
        return buf.a;
    }
};

}  // namespace

const LayerKind agnn_kind{.type = LayerType::agnn,
                          .attention = AttentionPattern::self_loops,
                          .make = make_step<AgnnStep>};

}  // namespace halo::detail
