// gat (PyG GATConv, concat, self-loops): z = x W (exchanged), el = z a_dst (owned rows), er =
// z a_src (owned rows before the exchange, halo rows after), h = act(per-head additive attention
// over A + I of z, + b).
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class GatStep final : public AttentionStep {
public:
    GatStep(const Layer& layer, StepContext& ctx)
        : AttentionStep(layer, ctx),
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
        const auto z = ctx.all(buf.b, out_w);
        const auto z_owned = ctx.owned(buf.b, out_w);
        const auto el = el_.view();
        const auto er = er_.view();
        ctx.timed(t, [&] {
            ctx.gemm(ctx.owned(buf.in, layer_.in_dim), w_.weight.view(), z_owned);
            ctx.gemm(z_owned, att_dst_.view(), el);
            ctx.gemm(z_owned, att_src_.view(), er_.rows_view(0, n_owned));
        });
        const auto out = ctx.owned(buf.a, out_w);
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
                    ctx.gemm(
                        DenseView<const float>{z.row(n_owned), n_total - n_owned, out_w, out_w},
                        att_src_.view(), er_.rows_view(n_owned, n_total));
                }
            },
            t);
        ctx.activate(t, out, w_.bias, layer_.activation);
        return buf.a;
    }

    void add_memory(MemoryReport& r, bool& gcn_pattern_counted) const override
    {
        WeightedStep::add_memory(r, gcn_pattern_counted);
        add_weights(r, {&att_src_, &att_dst_});
        r.feature_buffers += matrix_bytes(el_) + matrix_bytes(er_);
    }

private:
    Matrix att_src_, att_dst_;
    Matrix el_, er_;  // scores of destinations (owned rows) and sources (all rows)
};

class GatBlocks final : public BlockStep {
public:
    GatBlocks(const Layer& layer, Backend& backend)
        : BlockStep(layer, backend),
          att_src_(block_diagonal(backend, layer.att_src, layer.heads)),
          att_dst_(block_diagonal(backend, layer.att_dst, layer.heads))
    {
    }
    std::int64_t resident_bytes() const override
    {
        return BlockStep::resident_bytes() + matrix_bytes(att_src_) + matrix_bytes(att_dst_);
    }
    // z rows, destination scores; a source score per gathered column.
    std::int64_t row_floats() const override { return layer_.out_dim + layer_.heads; }
    std::int64_t col_bytes() const override { return 4 * layer_.heads; }

    void aggregate(BlockRun& run) const override
    {
        auto& backend = run.backend;
        auto plan = backend.make_attention_plan(run.block, run.max_dim, run.attention,
                                                run.hints(kernel_operator_gcn));
        const auto heads = layer_.heads;
        const auto d = layer_.head_dim();
        auto zb = run.up_rows(run.z, z_width());
        auto el = backend.allocate(run.rows.size(), heads);
        auto er = backend.allocate(run.block.num_cols, heads);
        run.mark();
        backend.gemm(zb.view(), att_dst_.view(), el.view(), 1.0f, 0.0f);
        backend.gemm(run.src.view(), att_src_.view(), er.view(), 1.0f, 0.0f);
        run.dense_done();
        const DenseView<const float> zs = run.src.view();
        const auto out = run.out.view();
        for (std::int64_t h = 0; h < heads; ++h) {
            plan->run_additive(columns(DenseView<const float>(el.view()), h, 1),
                               columns(DenseView<const float>(er.view()), h, 1),
                               layer_.negative_slope, columns(zs, h * d, d), columns(out, h * d, d),
                               run.rows);
        }
        run.spmm_done();
        backend.bias_activation(run.out.view(), w_.bias.data(), layer_.activation, run.rows);
        run.dense_done();
    }

private:
    Matrix att_src_, att_dst_;
};

}  // namespace

const LayerKind gat_kind{.type = LayerType::gat,
                         .attention = AttentionPattern::self_loops,
                         .make = make_step<GatStep>,
                         .make_blocks = make_block_step<GatBlocks>};

}  // namespace halo::detail
