// gcn (PyG GCNConv): h = act(A_gcn x W + b), aggregating first when the input is the narrower.
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class GcnStep final : public SpmmStep {
public:
    using SpmmStep::SpmmStep;

    // In place: x is dead once aggregated or transformed, so the output takes its buffer and the
    // intermediate the first free one: a gcn model runs in two buffers of n_total x max_dim.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto in_w = layer_.in_dim;
        const auto out_w = layer_.out_dim;
        if (layer_.aggregate_first()) {
            ctx.aggregate_input(kind_, op_, ctx.all(buf.in, in_w), ctx.all(buf.a, in_w), t);
            ctx.timed(t, [&] {
                ctx.gemm(ctx.owned(buf.a, in_w), w_.weight.view(), ctx.owned(buf.in, out_w));
            });
        } else {
            ctx.timed(t, [&] {
                ctx.gemm(ctx.owned(buf.in, in_w), w_.weight.view(), ctx.owned(buf.a, out_w));
            });
            ctx.aggregate(op_, ctx.all(buf.a, out_w), ctx.all(buf.in, out_w), t);
        }
        ctx.activate(t, ctx.owned(buf.in, out_w), w_.bias, layer_.activation);
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

    void aggregate(BlockRun& run) const override
    {
        auto& backend = run.backend;
        auto plan = backend.make_spmm_plan(run.block, run.hints(kernel_operator_gcn));
        run.mark();
        if (aggregate_first()) {
            auto agg = backend.allocate(run.rows.size(), layer_.in_dim);
            plan->run(run.src.view(), agg.view(), run.rows);
            run.spmm_done();
            backend.gemm(agg.view(), w_.weight.view(), run.out.view(), 1.0f, 0.0f);
        } else {
            plan->run(run.src.view(), run.out.view(), run.rows);
            run.spmm_done();
        }
        backend.bias_activation(run.out.view(), w_.bias.data(), layer_.activation, run.rows);
        run.dense_done();
    }
};

}  // namespace

const LayerKind gcn_kind{.type = LayerType::gcn,
                         .aggregation = Aggregation::gcn,
                         .two_buffers = true,
                         .make = make_step<GcnStep>,
                         .make_blocks = make_block_step<GcnBlocks>};

}  // namespace halo::detail
