// The layer types that aggregate with an SpMM operator (SpmmStep): gcn, sage and gin, each with
// its step in memory and its step over row blocks (BlockStep).
#include "layer_step.hpp"

namespace halo::detail {
namespace {

// A packed step's end: the output's fp32 sums `sums` with the bias and activation, in the last
// layer in place (sums is the fp32 output), else stored into `out` in 16 bits.
void finish_packed(StepContext& ctx, LayerTiming& t, DenseView<float> sums, const Matrix& bias,
                   Activation act, MutableFeatureView out)
{
    if (ctx.last_layer()) {
        ctx.activate(t, sums, bias, act);
    } else {
        ctx.timed(t, [&] { ctx.store_features(sums, bias, act, out); });
    }
}

// gcn (PyG GCNConv): h = act(A_gcn x W + b), aggregating first when the input is the narrower.
class GcnStep final : public SpmmStep {
public:
    using SpmmStep::SpmmStep;

    // In place: x is dead once aggregated or transformed, so the output takes its buffer and the
    // intermediate the first free one: a gcn model runs in two buffers of n_total x max_dim.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        if (ctx.packed()) {
            return forward_packed(ctx, buf, t);
        }
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        // Every matrix written is stored as the activations are (ctx.store: rounded where they
        // are 16-bit), the output fp32 in the last layer.
        const auto out = ctx.owned(buf.in, out_w);
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(kind_, op_, ctx.all(buf.in, in_w), ctx.all(buf.a, in_w), t);
            ctx.timed(t, [&] {
                ctx.store(ctx.owned(buf.a, in_w));
                ctx.gemm(ctx.owned(buf.a, in_w), w_.weight.view(), out);
                ctx.store_output(out);
            });
        } else {
            ctx.timed(t, [&] {
                ctx.gemm(ctx.owned(buf.in, in_w), w_.weight.view(), ctx.owned(buf.a, out_w));
                ctx.store(ctx.owned(buf.a, out_w));
            });
            ctx.aggregate(op_, ctx.all(buf.a, out_w), ctx.all(buf.in, out_w), t);
            ctx.store_output(out);
        }
        ctx.activate(t, out, w_.bias, layer_.activation);
        ctx.store_output(out);
        return buf.in;
    }

private:
    // forward() with the buffers in 16 bits (StepContext::packed()): the same stores, each
    // fused into the kernel or the store after it; the SpMM's and the GEMM's fp32 sums go through
    // the scratch (the last layer's output is fp32 and takes them directly).
    int forward_packed(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t)
    {
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        const auto n = ctx.n_owned;
        const bool last = ctx.last_layer();
        const auto out = ctx.owned(buf.in, out_w);  // fp32, the last layer's
        // The fp32 sums of the layer's output (before its bias): out itself in the last layer.
        const auto sums = last ? out : ctx.scratch(n, out_w);
        if (layer_.aggregate_first()) {
            const auto agg = ctx.scratch(n, in_w);
            ctx.aggregate_features(op_, ctx.fview(buf.in, ctx.n_total, in_w), agg, t);
            ctx.timed(t, [&] {
                const auto a = ctx.fview(buf.a, n, in_w);
                ctx.store_features(agg, {}, Activation::none, a);
                ctx.gemm_features(a, w_.weight, feature_view(sums));
            });
        } else {
            const auto z = ctx.fview(buf.a, ctx.n_total, out_w);
            ctx.timed(t, [&] {
                ctx.gemm_features(ctx.fview(buf.in, n, in_w), w_.weight, feature_rows(z, 0, n));
            });
            ctx.aggregate_features(op_, z, sums, t);
        }
        finish_packed(ctx, t, sums, w_.bias, layer_.activation, ctx.fview(buf.in, n, out_w));
        return buf.in;
    }
};

class GcnBlocks final : public BlockStep {
public:
    using BlockStep::BlockStep;
    bool aggregate_first() const override { return layer_.aggregate_first(); }
    std::int64_t z_width() const override
    {
        return aggregate_first() ? layer_.in_dim : layer_.out_dim;
    }
    // The aggregated rows before the GEMM.
    std::int64_t row_floats() const override { return aggregate_first() ? layer_.in_dim : 0; }
    bool z_may_stay() const override { return true; }
    bool fuses_transform() const override { return true; }  // out = act(A z + b): z alone
    std::string_view spmm_operator() const override { return kernel_operator_gcn; }

    void aggregate(BlockRun& run) const override
    {
        auto& backend = run.backend;
        run.mark();
        if (aggregate_first()) {
            auto agg = backend.allocate(run.rows.size(), layer_.in_dim);
            run.spmm(kernel_operator_gcn, agg.view());
            run.spmm_done();
            backend.gemm(agg.view(), w_.weight.view(), run.out.view(), 1.0f, 0.0f);
        } else {
            run.spmm(kernel_operator_gcn, run.out.view());
            run.spmm_done();
        }
        backend.bias_activation(run.out.view(), w_.bias.data(), layer_.activation, run.rows);
        run.dense_done();
    }
};

// sage (PyG SAGEConv, mean aggregation): h = act(x W_root + mean_N(x) W + b).
class SageStep final : public SpmmStep {
public:
    using SpmmStep::SpmmStep;

    // The aggregate in buffer b (the transformed rows first, then their aggregate in c), the
    // output in a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        if (ctx.packed()) {
            return forward_packed(ctx, buf, t);
        }
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        const auto x = ctx.owned(buf.in, in_w);
        const auto out = ctx.owned(buf.a, out_w);
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(kind_, op_, ctx.all(buf.in, in_w), ctx.all(buf.b, in_w), t);
            ctx.timed(t, [&] {
                ctx.store(ctx.owned(buf.b, in_w));
                ctx.gemm(x, w_.root_weight.view(), out);
                ctx.store_output(out);
                ctx.gemm(ctx.owned(buf.b, in_w), w_.weight.view(), out, 1.0f);
                ctx.store_output(out);
            });
        } else {
            ctx.timed(t, [&] {
                ctx.gemm(x, w_.weight.view(), ctx.owned(buf.b, out_w));
                ctx.store(ctx.owned(buf.b, out_w));
                ctx.gemm(x, w_.root_weight.view(), out);
                ctx.store_output(out);
            });
            ctx.aggregate(op_, ctx.all(buf.b, out_w), ctx.all(buf.c, out_w), t);
            ctx.timed(t, [&] {
                ctx.store(ctx.owned(buf.c, out_w));
                ctx.backend.axpby(1.0f, ctx.owned(buf.c, out_w), 1.0f, out);
                ctx.store_output(out);
            });
        }
        ctx.activate(t, out, w_.bias, layer_.activation);
        ctx.store_output(out);
        return buf.a;
    }

private:
    // forward() with the buffers in 16 bits: the output's fp32 sums in the scratch (rounded in
    // place where the definition stores them, then the second GEMM or the aggregate added), the
    // aggregate in fp32 in buffer c; the last layer's output fp32 in buffer a.
    int forward_packed(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t)
    {
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        const auto n = ctx.n_owned;
        const bool last = ctx.last_layer();
        const auto x = ctx.fview(buf.in, n, in_w);
        const auto out = ctx.owned(buf.a, out_w);
        const auto sums = last ? out : ctx.scratch(n, out_w);
        const auto root = [&] {  // sums = x W_root, stored
            ctx.gemm_features(x, w_.root_weight, feature_view(sums));
            if (!last) {
                ctx.store(sums);
            }
        };
        if (layer_.aggregate_first()) {
            const auto agg = ctx.owned(buf.c, in_w);
            ctx.aggregate_features(op_, ctx.fview(buf.in, ctx.n_total, in_w), agg, t);
            ctx.timed(t, [&] {
                const auto b = ctx.fview(buf.b, n, in_w);
                ctx.store_features(agg, {}, Activation::none, b);
                root();
                ctx.gemm_features(b, w_.weight, feature_view(sums), 1.0f);
            });
        } else {
            const auto z = ctx.fview(buf.b, ctx.n_total, out_w);
            ctx.timed(t, [&] {
                ctx.gemm_features(x, w_.weight, feature_rows(z, 0, n));
                root();
            });
            const auto agg = ctx.owned(buf.c, out_w);
            ctx.aggregate_features(op_, z, agg, t);
            ctx.timed(t, [&] {
                ctx.store(agg);
                ctx.backend.axpby(1.0f, agg, 1.0f, sums);
            });
        }
        finish_packed(ctx, t, sums, w_.bias, layer_.activation, ctx.fview(buf.a, n, out_w));
        return buf.a;
    }
};

class SageBlocks final : public BlockStep {
public:
    using BlockStep::BlockStep;
    bool aggregate_first() const override { return layer_.aggregate_first(); }
    std::int64_t z_width() const override
    {
        return aggregate_first() ? layer_.in_dim : layer_.out_dim;
    }
    // x rows (the root term), aggregated rows.
    std::int64_t row_floats() const override { return layer_.in_dim + z_width(); }
    bool z_may_stay() const override { return true; }

    void aggregate(BlockRun& run) const override
    {
        auto& backend = run.backend;
        auto xb = run.up_rows(run.x, layer_.in_dim);
        auto agg = backend.allocate(run.rows.size(), z_width());
        run.mark();
        run.spmm(kernel_operator_adjacency, agg.view());
        run.spmm_done();
        backend.gemm(xb.view(), w_.root_weight.view(), run.out.view(), 1.0f, 0.0f);
        if (aggregate_first()) {
            backend.gemm(agg.view(), w_.weight.view(), run.out.view(), 1.0f, 1.0f);
        } else {
            backend.axpby(1.0f, agg.view(), 1.0f, run.out.view());
        }
        backend.bias_activation(run.out.view(), w_.bias.data(), layer_.activation, run.rows);
        run.dense_done();
    }
};

// gin (PyG GINConv with a 2-layer MLP): h = act(MLP((1 + eps) x + sum_N(x))),
// MLP(z) = relu(z W + b) W2 + b2; the first GEMM comes before the sum when it narrows the rows.
class GinStep final : public SpmmStep {
public:
    using SpmmStep::SpmmStep;

    // The MLP's input in buffer b, its hidden rows in c, the output in a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        if (ctx.packed()) {
            return forward_packed(ctx, buf, t);
        }
        const auto in_w = layer_.in_dim;
        const auto hid = layer_.hidden_dim;
        const float self = 1.0f + layer_.eps;
        const auto x = ctx.owned(buf.in, in_w);
        const auto hidden = ctx.owned(buf.c, hid);
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(kind_, op_, ctx.all(buf.in, in_w), ctx.all(buf.b, in_w), t);
            ctx.timed(t, [&] {
                const auto sum = ctx.owned(buf.b, in_w);
                ctx.store(sum);
                ctx.backend.axpby(self, x, 1.0f, sum);
                ctx.store(sum);
                ctx.gemm(sum, w_.weight.view(), hidden);
                ctx.store(hidden);
            });
        } else {
            ctx.timed(t, [&] {
                ctx.gemm(x, w_.weight.view(), ctx.owned(buf.b, hid));
                ctx.store(ctx.owned(buf.b, hid));
            });
            ctx.aggregate(op_, ctx.all(buf.b, hid), ctx.all(buf.c, hid), t);
            ctx.timed(t, [&] {
                ctx.store(hidden);
                ctx.backend.axpby(self, ctx.owned(buf.b, hid), 1.0f, hidden);
                ctx.store(hidden);
            });
        }
        ctx.timed(t, [&] {
            const auto out = ctx.owned(buf.a, layer_.out_dim);
            ctx.backend.bias_activation(hidden, w_.bias.data(), Activation::relu, {0, ctx.n_owned});
            ctx.store(hidden);
            ctx.gemm(hidden, w_.weight2.view(), out);
            ctx.store_output(out);
            ctx.backend.bias_activation(out, w_.bias2.data(), layer_.activation, {0, ctx.n_owned});
            ctx.store_output(out);
        });
        return buf.a;
    }

private:
    // forward() with the buffers in 16 bits: the sum (1 + eps) x + sum_N(x) in the scratch, the
    // self term widened into buffer c first; the MLP's hidden rows in 16 bits in buffer c.
    int forward_packed(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t)
    {
        const auto in_w = layer_.in_dim;
        const auto hid = layer_.hidden_dim;
        const auto n = ctx.n_owned;
        const float self = 1.0f + layer_.eps;
        const auto x = ctx.fview(buf.in, n, in_w);
        const auto hidden = ctx.fview(buf.c, n, hid);
        // sum += self * own (16-bit rows, widened into buffer c), then hidden stored from it.
        const auto add_self = [&](FeatureView own, DenseView<float> sum) {
            ctx.store(sum);
            const auto wide = ctx.owned(buf.c, own.cols);
            ctx.backend.widen_features(own, wide);
            ctx.backend.axpby(self, wide, 1.0f, sum);
        };
        if (layer_.aggregate_first()) {
            const auto sum = ctx.scratch(n, in_w);
            ctx.aggregate_features(op_, ctx.fview(buf.in, ctx.n_total, in_w), sum, t);
            ctx.timed(t, [&] {
                add_self(x, sum);
                const auto b = ctx.fview(buf.b, n, in_w);
                ctx.store_features(sum, {}, Activation::none, b);
                const auto h = ctx.scratch(n, hid);  // the scratch again: sum is stored
                ctx.gemm_features(b, w_.weight, feature_view(h));
                ctx.store_features(h, w_.bias, Activation::relu, hidden);
            });
        } else {
            const auto z = ctx.fview(buf.b, ctx.n_total, hid);
            ctx.timed(t, [&] { ctx.gemm_features(x, w_.weight, feature_rows(z, 0, n)); });
            const auto h = ctx.scratch(n, hid);
            ctx.aggregate_features(op_, z, h, t);
            ctx.timed(t, [&] {
                add_self(feature_rows(z, 0, n), h);
                ctx.store_features(h, w_.bias, Activation::relu, hidden);
            });
        }
        const bool last = ctx.last_layer();
        const auto out = ctx.owned(buf.a, layer_.out_dim);
        const auto sums = last ? out : ctx.scratch(n, layer_.out_dim);
        ctx.timed(t, [&] { ctx.gemm_features(hidden, w_.weight2, feature_view(sums)); });
        finish_packed(ctx, t, sums, w_.bias2, layer_.activation,
                      ctx.fview(buf.a, n, layer_.out_dim));
        return buf.a;
    }
};

class GinBlocks final : public BlockStep {
public:
    using BlockStep::BlockStep;
    bool aggregate_first() const override { return layer_.aggregate_first(); }
    std::int64_t z_width() const override
    {
        return aggregate_first() ? layer_.in_dim : layer_.hidden_dim;
    }
    // The own rows, the sum and the hidden rows (the sum is the hidden rows when z is).
    std::int64_t row_floats() const override
    {
        return aggregate_first() ? 2 * layer_.in_dim + layer_.hidden_dim : 2 * layer_.hidden_dim;
    }
    bool z_may_stay() const override { return true; }

    void aggregate(BlockRun& run) const override
    {
        auto& backend = run.backend;
        const auto r = run.rows.size();
        const float self = 1.0f + layer_.eps;
        Matrix holder;  // z is x when the layer aggregates first
        const auto own = run.z_rows(holder, z_width());
        auto agg = backend.allocate(r, z_width());
        run.mark();
        run.spmm(kernel_operator_adjacency, agg.view());
        run.spmm_done();
        backend.axpby(self, own, 1.0f, agg.view());
        Matrix hidden;
        if (aggregate_first()) {
            hidden = backend.allocate(r, layer_.hidden_dim);
            backend.gemm(agg.view(), w_.weight.view(), hidden.view(), 1.0f, 0.0f);
        } else {
            hidden = agg;
        }
        backend.bias_activation(hidden.view(), w_.bias.data(), Activation::relu, run.rows);
        backend.gemm(hidden.view(), w_.weight2.view(), run.out.view(), 1.0f, 0.0f);
        backend.bias_activation(run.out.view(), w_.bias2.data(), layer_.activation, run.rows);
        run.dense_done();
    }
};

}  // namespace

const LayerKind gcn_kind{.type = LayerType::gcn,
                         .aggregation = Aggregation::gcn,
                         .two_buffers = true,
                         .packs_16bit = true,
                         .make = make_step<GcnStep>,
                         .make_blocks = make_block_step<GcnBlocks>};

const LayerKind sage_kind{.type = LayerType::sage,
                          .aggregation = Aggregation::mean,
                          .packs_16bit = true,
                          .make = make_step<SageStep>,
                          .make_blocks = make_block_step<SageBlocks>};

const LayerKind gin_kind{.type = LayerType::gin,
                         .aggregation = Aggregation::sum,
                         .packs_16bit = true,
                         .make = make_step<GinStep>,
                         .make_blocks = make_block_step<GinBlocks>};

}  // namespace halo::detail
