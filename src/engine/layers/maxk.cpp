// maxk (MaxK-GNN, paper 000): z = x W + b, the top-k of each row into the plan's CBSR, the CBSR
// rows exchanged as records, h = act(A_gcn * S) through the plan's SSD operator.
#include "halo/kernels_host/maxk.hpp"

#include "halo/core/error.hpp"
#include "halo/core/kernel_metadata.hpp"
#include "layer_step.hpp"

namespace halo::detail {
namespace {

class MaxkStep final : public WeightedStep {
public:
    MaxkStep(const Layer& layer, StepContext& ctx)
        : WeightedStep(layer, ctx),
          operator_(ctx.operator_matrix(Aggregation::gcn)),
          n_total_(ctx.n_total)
    {
        if (layer.out_dim > kMaxkMaxDim) {
            HALO_THROW(InputError, "maxk layer of width ", layer.out_dim,
                       ": the MaxK kernels take ", "widths up to ", kMaxkMaxDim);
        }
        plan_ = ctx.backend.make_maxk_plan(operator_, layer.out_dim, layer.k,
                                           ctx.hints_for(kernel_operator_gcn.data()));
    }

    // z in buffer b, the records in buffer c, the output in buffer a.
    int forward(StepContext& ctx, const LayerBuffers& buf, LayerTiming& t) override
    {
        const auto n_owned = ctx.n_owned;
        const auto out_w = layer_.out_dim;
        auto& plan = *plan_;
        ctx.timed(t, [&] {
            const auto z = ctx.owned(buf.b, out_w);
            ctx.gemm(ctx.owned(buf.in, layer_.in_dim), w_.weight.view(), z);
            ctx.backend.bias_activation(z, w_.bias.data(), Activation::none, {0, n_owned});
            plan.topk(z);
        });
        const auto out = ctx.owned(buf.a, out_w);
        // One part: nothing to exchange. With several, every rank takes the exchange's path,
        // also a rank without peers (an all-interior part), whose exchange moves nothing: the
        // exchange's barriers (step timing, EngineOptions::exchange_barrier) are collective, and
        // a rank that skipped them left the others waiting (issue 48's matrix).
        if (ctx.shard.num_parts == 1) {
            const auto t0 = std::chrono::steady_clock::now();
            plan.aggregate(out, {0, n_owned});
            if (ctx.options.step_timing) {
                ctx.backend.synchronize();
                t.spmm += seconds_since(t0);
            }
        } else {
            const auto records = ctx.all(buf.c, MaxkPlan::record_words(layer_.k));
            ctx.timed(t, [&] { plan.pack({0, n_owned}, records); });
            ctx.exchange_and_compute(
                records, out_w, [&](RowRange rows) { plan.aggregate(out, rows); },
                [&] {
                    plan.unpack(records, {n_owned, ctx.n_total});
                },
                t);
        }
        ctx.activate(t, out, Matrix{}, layer_.activation);
        return buf.a;
    }

    // Every maxk plan holds the gcn operator (its nonzeros counted once) and a CBSR of k floats
    // and k int16 per row.
    void add_memory(MemoryReport& r, bool& gcn_pattern_counted) const override
    {
        WeightedStep::add_memory(r, gcn_pattern_counted);
        auto c = csr_memory(operator_);
        if (gcn_pattern_counted) {
            c.nonzeros = 0;
        }
        gcn_pattern_counted = true;
        c.kernel_metadata = 6 * n_total_ * layer_.k;
        r += c;
    }

    std::string report(std::size_t index) const override
    {
        return "maxk layer " + std::to_string(index) + ": " + plan_->algorithm() + "\n";
    }

private:
    const Csr& operator_;
    std::int64_t n_total_ = 0;
    std::unique_ptr<MaxkPlan> plan_;
};

class MaxkBlocks final : public BlockStep {
public:
    using BlockStep::BlockStep;
    // The CBSR row: k values, k int16 indices.
    std::int64_t col_bytes() const override { return 6 * layer_.k; }
    std::int64_t col_metadata_bytes() const override { return 6 * layer_.k; }
    void transform_epilogue(Backend& backend, DenseView<float> z, std::int64_t rows) const override
    {
        backend.bias_activation(z, w_.bias.data(), Activation::none, {0, rows});
    }

    // The top-k is row-local: the halo rows' records as sent.
    void aggregate(BlockRun& run) const override
    {
        auto plan = run.backend.make_maxk_plan(run.block, layer_.out_dim, layer_.k,
                                               run.hints(kernel_operator_gcn));
        run.mark();
        plan->topk(run.src.view());
        plan->aggregate(run.out.view(), run.rows);
        run.spmm_done();
        run.backend.bias_activation(run.out.view(), nullptr, layer_.activation, run.rows);
        run.dense_done();
    }
};

}  // namespace

const LayerKind maxk_kind{.type = LayerType::maxk,
                          .aggregation = Aggregation::gcn,
                          .make = make_step<MaxkStep>,
                          .make_blocks = make_block_step<MaxkBlocks>};

}  // namespace halo::detail
