// sage (PyG SAGEConv, mean aggregation): h = act(x W_root + mean_N(x) W + b).
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class SageStep final : public SpmmStep {
public:
    using SpmmStep::SpmmStep;

    // The aggregate in buffer b (the transformed rows first, then their aggregate in c), the
    // output in a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        const auto x = ctx.owned(buf.in, in_w);
        const auto out = ctx.owned(buf.a, out_w);
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(kind_, op_, ctx.all(buf.in, in_w), ctx.all(buf.b, in_w), t);
            ctx.timed(t, [&] {
                ctx.gemm(x, w_.root_weight.view(), out);
                ctx.gemm(ctx.owned(buf.b, in_w), w_.weight.view(), out, 1.0f);
            });
        } else {
            ctx.timed(t, [&] {
                ctx.gemm(x, w_.weight.view(), ctx.owned(buf.b, out_w));
                ctx.gemm(x, w_.root_weight.view(), out);
            });
            ctx.aggregate(op_, ctx.all(buf.b, out_w), ctx.all(buf.c, out_w), t);
            ctx.timed(t, [&] { ctx.backend.axpby(1.0f, ctx.owned(buf.c, out_w), 1.0f, out); });
        }
        ctx.activate(t, out, w_.bias, layer_.activation);
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
        auto plan = backend.make_spmm_plan(run.block, run.hints(kernel_operator_adjacency));
        auto xb = run.up_rows(run.x, layer_.in_dim);
        auto agg = backend.allocate(run.rows.size(), z_width());
        run.mark();
        plan->run(run.src.view(), agg.view(), run.rows);
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

}  // namespace

const LayerKind sage_kind{.type = LayerType::sage,
                          .aggregation = Aggregation::mean,
                          .make = make_step<SageStep>,
                          .make_blocks = make_block_step<SageBlocks>};

}  // namespace halo::detail
