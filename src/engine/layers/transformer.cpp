// transformer (PyG TransformerConv, concat, root weight): one GEMM x [Wq | Wk | Wv | W_root] +
// [bq | bk | bv | 0] into the shared wide buffer (n_total x 4 out_dim, or 3 without a skip
// connection), whose K | V columns the exchange carries; attention per head over the adjacency
// straight into the output, the skip columns added, then the skip bias and the activation.
#include <cmath>

#include "layer_step.hpp"

namespace halo::detail {
namespace {

// Of the dense weights only the bias is used, the skip connection's (`weight` is empty).
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
            [&](RowRange rows) {
                for (std::int64_t h = 0; h < heads; ++h) {
                    attention_.run(columns(q, h * d, d), columns(k_all, h * d, d),
                                   columns(v_all, h * d, d), scale, columns(out, h * d, d), rows);
                }
            },
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

}  // namespace

const LayerKind transformer_kind{.type = LayerType::transformer,
                                 .attention = AttentionPattern::adjacency,
                                 .make = make_step<TransformerStep>};

}  // namespace halo::detail
