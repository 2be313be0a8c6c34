// gat (PyG GATConv, concat, self-loops): z = x W (exchanged), el = z a_dst (owned rows), er =
// z a_src (owned rows before the exchange, halo rows after), h = act(per-head additive attention
// over A + I of z, + b).
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class GatStep final : public LayerStep {
public:
    GatStep(const Layer& layer, StepContext& ctx)
        : layer_(layer),
          attention_(ctx.attention(AttentionPattern::self_loops)),
          weight_(ctx.upload(layer.weight, layer.weight.empty() ? 0 : layer.in_dim, layer.out_dim)),
          bias_(ctx.upload(layer.bias, 1, layer.bias.empty() ? 0 : layer.out_dim)),
          att_src_(block_diagonal(ctx.backend, layer.att_src, layer.heads)),
          att_dst_(block_diagonal(ctx.backend, layer.att_dst, layer.heads)),
          el_(ctx.backend.allocate(ctx.n_owned, layer.heads)),
          er_(ctx.backend.allocate(ctx.n_total, layer.heads))
    {
    }

    // z in buffer b, the output in buffer a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto n_owned = ctx.n_owned;
        const auto n_total = ctx.n_total;
        const auto out_w = layer_.out_dim;
        const auto d = layer_.head_dim();
        const auto z = ctx.view(buf.b, n_total, out_w);
        const auto z_owned = ctx.view(buf.b, n_owned, out_w);
        const auto el = el_.view();
        const auto er = er_.view();
        ctx.timed(t, [&] {
            ctx.backend.gemm(ctx.view(buf.in, n_owned, layer_.in_dim), weight_.view(), z_owned,
                             1.0f, 0.0f);
            ctx.backend.gemm(z_owned, att_dst_.view(), el, 1.0f, 0.0f);
            ctx.backend.gemm(z_owned, att_src_.view(), er_.rows_view(0, n_owned), 1.0f, 0.0f);
        });
        const auto out = ctx.view(buf.a, n_owned, out_w);
        ctx.exchange_and_compute(
            z, out_w,
            [&](RowRange rows) {
                for (std::int64_t h = 0; h < layer_.heads; ++h) {
                    attention_.run_additive(columns(el, h, 1), columns(er, h, 1),
                                            layer_.negative_slope, columns(z, h * d, d),
                                            columns(out, h * d, d), rows);
                }
            },
            [&] {
                if (n_total > n_owned) {
                    ctx.backend.gemm(
                        DenseView<const float>{z.row(n_owned), n_total - n_owned, out_w, out_w},
                        att_src_.view(), er_.rows_view(n_owned, n_total), 1.0f, 0.0f);
                }
            },
            t);
        ctx.timed(t, [&] {
            ctx.backend.bias_activation(out, bias_.data(), layer_.activation, {0, n_owned});
        });
        return buf.a;
    }

    void add_memory(MemoryReport& r, bool&) const override
    {
        add_weights(r, {&weight_, &bias_, &att_src_, &att_dst_});
        r.feature_buffers += matrix_bytes(el_) + matrix_bytes(er_);
    }

private:
    const Layer& layer_;
    AttentionPlan& attention_;
    Matrix weight_, bias_, att_src_, att_dst_;
    Matrix el_, er_;  // scores of destinations (owned rows) and sources (all rows)
};

}  // namespace

std::unique_ptr<LayerStep> make_gat_step(const Layer& layer, StepContext& ctx)
{
    return std::make_unique<GatStep>(layer, ctx);
}

}  // namespace halo::detail
