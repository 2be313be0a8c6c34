// The layer types that attend (AttentionStep): agnn, transformer and gat, each with its step in
// memory and, where row blocks run it (gat), its step over row blocks (BlockStep).
#include <cmath>

#include "layer_step.hpp"

namespace halo::detail {
namespace {

// agnn (PyG AGNNConv after a Linear): z = x W + b (or x without a weight), zn = z / |z| row by
// row (owned rows before the exchange, halo rows after), h = act(softmax(beta zn zn^T on A + I) z).
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

// transformer (PyG TransformerConv, concat, root weight): one GEMM x [Wq | Wk | Wv | W_root] +
// [bq | bk | bv | 0] into the shared wide buffer (n_total x 4 out_dim, or 3 without a skip
// connection), whose K | V columns the exchange carries; attention per head over the adjacency
// straight into the output, the skip columns added, then the skip bias and the activation. Of
// the dense weights only the bias is used, the skip connection's (`weight` is empty).
class TransformerStep final : public AttentionStep {
public:
    TransformerStep(const Layer& layer, StepContext& ctx) : AttentionStep(layer, ctx)
    {
        // One GEMM computes q, k, v and the skip term: the weights side by side.
        const auto in_w = layer.in_dim;
        const auto out_w = layer.out_dim;
        std::vector<const std::vector<float>*> blocks{&layer.query_weight, &layer.key_weight,
                                                      &layer.value_weight};
        std::vector<const std::vector<float>*> biases{&layer.query_bias, &layer.key_bias,
                                                      &layer.value_bias};
        if (!layer.root_weight.empty()) {
            blocks.push_back(&layer.root_weight);
            biases.push_back(nullptr);  // the skip bias is added with the activation
        }
        const auto width = static_cast<std::int64_t>(blocks.size()) * out_w;
        std::vector<float> weight(static_cast<std::size_t>(in_w * width));
        std::vector<float> bias(static_cast<std::size_t>(width), 0.0f);
        for (std::size_t blk = 0; blk < blocks.size(); ++blk) {
            const auto col0 = static_cast<std::int64_t>(blk) * out_w;
            for (std::int64_t r = 0; r < in_w; ++r) {
                std::copy_n(blocks[blk]->begin() + r * out_w, out_w,
                            weight.begin() + r * width + col0);
            }
            if (biases[blk] != nullptr && !biases[blk]->empty()) {
                std::copy_n(biases[blk]->begin(), out_w, bias.begin() + col0);
            }
        }
        projection_ = ctx.upload(weight, in_w, width);
        projection_bias_ = ctx.upload(bias, 1, width);
        ctx.reserve_wide(projection_.cols());
    }

    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto out_w = layer_.out_dim;
        const auto heads = layer_.heads;
        const auto d = layer_.head_dim();
        const auto width = projection_.cols();
        const DenseView<float> all{ctx.wide().data(), ctx.n_total, width, width};
        const DenseView<float> owned{all.data, ctx.n_owned, width, width};
        const auto q = columns(owned, 0, out_w);
        const auto kv = columns(all, out_w, 2 * out_w);
        const auto k_all = columns(all, out_w, out_w);
        const auto v_all = columns(all, 2 * out_w, out_w);
        const auto out = ctx.owned(buf.a, out_w);
        ctx.timed(t, [&] {
            ctx.gemm(ctx.owned(buf.in, layer_.in_dim), projection_.view(), owned);
            ctx.backend.bias_activation(owned, projection_bias_.data(), Activation::none,
                                        {0, ctx.n_owned});
        });
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        ctx.exchange_and_compute(
            kv, 2 * out_w,
            [&](RowRange rows) { attention_.run_heads(q, k_all, v_all, heads, scale, out, rows); },
            [] {}, t);
        if (width == 4 * out_w) {
            ctx.timed(
                t, [&] { ctx.backend.axpby(1.0f, columns(owned, 3 * out_w, out_w), 1.0f, out); });
        }
        ctx.activate(t, out, w_.bias, layer_.activation);
        return buf.a;
    }

    void add_memory(MemoryReport& r, bool& gcn_pattern_counted) const override
    {
        WeightedStep::add_memory(r, gcn_pattern_counted);
        add_weights(r, {&projection_, &projection_bias_});
    }

private:
    Matrix projection_, projection_bias_;
};

// gat (PyG GATConv, concat, self-loops): z = x W (exchanged), el = z a_dst (owned rows), er =
// z a_src (owned rows before the exchange, halo rows after), h = act(per-head additive attention
// over A + I of z, + b).
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

const LayerKind agnn_kind{.type = LayerType::agnn,
                          .attention = AttentionPattern::self_loops,
                          .make = make_step<AgnnStep>};

const LayerKind transformer_kind{.type = LayerType::transformer,
                                 .attention = AttentionPattern::adjacency,
                                 .make = make_step<TransformerStep>};

const LayerKind gat_kind{.type = LayerType::gat,
                         .attention = AttentionPattern::self_loops,
                         .make = make_step<GatStep>,
                         .make_blocks = make_block_step<GatBlocks>};

}  // namespace halo::detail
