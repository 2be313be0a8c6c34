// halo-bench maxk: the MaxK-GNN kernels (paper 000, docs/MAXK.md) on one graph and one GPU.
//
// For each k: the top-k activation of a random embedding X (n x D) into CBSR, then the SSD
// aggregation A * CBSR in every asked variant (the MaxK baseline, the decoupled operator and its
// ablations) for each edge group size, group order and buffers-per-warp setting, and cuSPARSE SpMM
// of A by the dense X at d = D, all in the same run. Before timing, every result is checked against
// the CPU reference on NaN-poisoned outputs (all rows of small graphs, a seeded sample of large
// ones): the top-k bit for bit, the SSD within tolerance. Timings are medians of CUDA-event-timed
// runs after warm-up, rotating among enough input/output sets that consecutive runs do not find
// their data in L2. Exit code: 0 all checks passed, 1 an error stopped the run, 3 a check failed.
#include "bench_maxk.hpp"

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "app_common.hpp"
#include "bench_common.hpp"
#include "bench_util.hpp"
#include "halo/core/error.hpp"
#include "halo/core/io.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/maxk.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/maxk.hpp"
#include "halo/kernels_host/spmm.hpp"

namespace halo::bench_app {
namespace maxk {
namespace {

namespace bench = halo::cuda::bench;
using halo::cuda::SsdLaunch;
using halo::cuda::SsdOrder;
using halo::cuda::SsdVariant;

// ---------------------------------------------------------------------------------------------
// Checks: the checked rows as a CSR of their own over the columns they read (renumbered), so the
// references need only those rows of X and of the CBSR.

// y (checked rows, packed) against ref: |y - ref| <= terms[r] * eps * scale, where scale is the
// element's sum of |products| and terms[r] the row's bound on rounding steps.
Check compare(const std::vector<float>& y, const std::vector<double>& ref,
              const std::vector<double>& scale, const std::vector<double>& terms, std::int64_t dim)
{
    constexpr double eps = std::numeric_limits<float>::epsilon();
    Check c;
    for (std::size_t e = 0; e < y.size(); ++e) {
        ++c.elements;
        if (!std::isfinite(y[e])) {
            ++c.nonfinite;
            ++c.bad;
            continue;
        }
        const double diff = std::fabs(static_cast<double>(y[e]) - ref[e]);
        if (diff > terms[e / dim] * eps * scale[e]) {
            ++c.bad;
        }
        if (diff > 0) {
            c.max_rel_error =
                std::max(c.max_rel_error,
                         scale[e] > 0 ? diff / scale[e] : std::numeric_limits<double>::max());
        }
    }
    return c;
}

// The report's check: elements and bad_elements, nonfinite_elements, max_rel_error.
RowCheck row_check(const Check& c)
{
    return {"elements", c.elements, c.bad,
            Json{{"nonfinite_elements", c.nonfinite}, {"max_rel_error", c.max_rel_error}}};
}

// Double-precision product of the checked rows and the per-element sum of |products|, for a
// dense right-hand side (X rows of cs.columns, packed) or a CBSR one (its rows of cs.columns).
struct Reference {
    std::vector<double> values;
    std::vector<double> scale;
};

Reference dense_reference(const CheckSet& cs, const std::vector<float>& xs, std::int64_t dim)
{
    Reference r{std::vector<double>(cs.rows.size() * dim, 0.0),
                std::vector<double>(cs.rows.size() * dim, 0.0)};
    for (std::int64_t i = 0; i < cs.sub.num_rows; ++i) {
        for (auto p = cs.sub.indptr[i]; p < cs.sub.indptr[i + 1]; ++p) {
            const double v = cs.sub.has_values() ? cs.sub.values[p] : 1.0;
            const float* x = xs.data() + cs.sub.indices[p] * dim;
            for (std::int64_t j = 0; j < dim; ++j) {
                r.values[i * dim + j] += v * x[j];
                r.scale[i * dim + j] += std::fabs(v * x[j]);
            }
        }
    }
    return r;
}

Reference cbsr_reference(const CheckSet& cs, const Cbsr& s)
{
    const auto dim = s.dim;
    Reference r{std::vector<double>(cs.rows.size() * dim, 0.0),
                std::vector<double>(cs.rows.size() * dim, 0.0)};
    for (std::int64_t i = 0; i < cs.sub.num_rows; ++i) {
        for (auto p = cs.sub.indptr[i]; p < cs.sub.indptr[i + 1]; ++p) {
            const double v = cs.sub.has_values() ? cs.sub.values[p] : 1.0;
            const auto c = cs.sub.indices[p];
            for (std::int64_t t = 0; t < s.k; ++t) {
                const auto j = s.indices[c * s.k + t];
                r.values[i * dim + j] += v * s.values[c * s.k + t];
                r.scale[i * dim + j] += std::fabs(v * s.values[c * s.k + t]);
            }
        }
    }
    return r;
}

// ---------------------------------------------------------------------------------------------
// Buffers: sets of X, Y and CBSR, each kind in one allocation, rotated between timed runs.

struct Sets {
    std::int64_t count = 0;
    std::size_t stride = 0;  // elements from one set to the next (256-byte aligned)
    bench::DeviceArray data;

    float* set(std::int64_t s) const { return data.data() + (s % count) * stride; }
};

// CBSR sets of one k: values in one allocation, int16 indices in another (as floats' storage).
struct CbsrSets {
    std::int64_t count = 0;
    std::size_t value_stride = 0;
    std::size_t index_stride = 0;  // in int16
    bench::DeviceArray values;
    bench::DeviceArray indices;  // storage for the int16 indices

    CbsrView<float> view(std::int64_t s, std::int64_t rows, std::int64_t dim, std::int64_t k) const
    {
        s %= count;
        auto* idx = reinterpret_cast<cbsr_index*>(indices.data()) + s * index_stride;
        return {values.data() + s * value_stride, idx, rows, dim, k};
    }
};

void check_options(const MaxkOptions& o)
{
    if (o.dim < 1 || o.dim > kMaxkMaxDim) {
        HALO_THROW(InputError, "--dim ", o.dim, " outside [1, ", kMaxkMaxDim, "]");
    }
    for (const auto k : o.ks) {
        if (k < 1 || k > o.dim) {
            HALO_THROW(InputError, "--ks: k = ", k, " outside [1, ", o.dim, "] (the width)");
        }
    }
    for (const auto g : o.group_sizes) {
        validate(EdgeGroupOptions{g});
    }
    for (const auto b : o.buffers) {
        validate(SsdLaunch{SsdVariant::decoupled, o.warps_per_block, b});
    }
    for (const auto& v : o.variants) {
        (void)cuda::parse_ssd_variant(v);
    }
    for (const auto& order : o.orders) {
        (void)cuda::parse_ssd_order(order);
    }
}

bool has_slots(SsdVariant v)
{
    return v == SsdVariant::decoupled || v == SsdVariant::no_atomic_aware;
}

// Variants with the MaxK baseline first (added if not asked for), so that every other
// variant's speed-up is known when it is printed.
std::vector<SsdVariant> variants_in_order(const MaxkOptions& o)
{
    std::vector<SsdVariant> variants;
    for (const auto& v : o.variants) {
        variants.push_back(cuda::parse_ssd_variant(v));
    }
    if (std::find(variants.begin(), variants.end(), SsdVariant::maxk) == variants.end()) {
        variants.push_back(SsdVariant::maxk);
        fmt::print("maxk runs as the baseline of every comparison\n");
    }
    std::stable_partition(variants.begin(), variants.end(),
                          [](SsdVariant v) { return v == SsdVariant::maxk; });
    variants.erase(std::unique(variants.begin(), variants.end()), variants.end());
    return variants;
}

// Row order first, so that every record of the other order knows the paper's baseline.
std::vector<SsdOrder> orders_in_order(const MaxkOptions& o)
{
    std::vector<SsdOrder> orders;
    for (const auto& name : o.orders) {
        orders.push_back(cuda::parse_ssd_order(name));
    }
    std::stable_partition(orders.begin(), orders.end(),
                          [](SsdOrder order) { return order == SsdOrder::rows; });
    orders.erase(std::unique(orders.begin(), orders.end()), orders.end());
    return orders;
}

using SsdPlans = std::map<std::int32_t, std::unique_ptr<cuda::DeviceSsdPlan>>;

// One SSD plan (upload + edge groups) per group size.
SsdPlans make_ssd_plans(cuda::Context& ctx, const Csr& a, const MaxkOptions& o)
{
    SsdPlans plans;
    for (const auto g : o.group_sizes) {
        cuda::SsdOptions options;
        options.groups.group_size = g;
        options.launch.warps_per_block = o.warps_per_block;
        plans[g] = cuda::make_ssd_plan(ctx, a, o.dim, options);
        const auto& groups = plans[g]->groups();
        const auto shared = std::count(groups.update_mode.begin(), groups.update_mode.end(), 1);
        fmt::print("edge groups of {}: {} groups, {:.1f}% of them in shared rows\n", g,
                   groups.size(), 100.0 * static_cast<double>(shared) / double(groups.size()));
    }
    return plans;
}

// X and Y sets (X: n_cols x D, Y: n_rows x D), for cuSPARSE, the top-k and the SSD outputs.
struct XySets {
    Sets x;
    Sets y;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t dim = 0;

    DenseView<const float> x_view(std::int64_t s) const { return {x.set(s), cols, dim, dim}; }
    DenseView<float> y_view(std::int64_t s) const { return {y.set(s), rows, dim, dim}; }
    void poison(std::int64_t s, cudaStream_t stream) const
    {
        constexpr float nan = std::numeric_limits<float>::quiet_NaN();
        bench::fill_value(y.set(s), static_cast<std::size_t>(rows * dim), nan, stream);
    }
};

XySets make_xy_sets(const BenchDevice& device, const Csr& a, const MaxkOptions& o,
                    cudaStream_t stream)
{
    const auto dim = o.dim;
    const auto l2 = device.info.l2_cache_bytes;
    const std::size_t x_stride = aligned_floats(a.num_cols * dim);
    const std::size_t y_stride = aligned_floats(a.num_rows * dim);
    const auto xy_sets = fitting_sets(
        (x_stride + y_stride) * sizeof(float),
        wanted_sets(static_cast<double>((a.num_cols + a.num_rows) * dim) * sizeof(float), l2));
    Sets x{xy_sets, x_stride, bench::DeviceArray(x_stride * xy_sets)};
    // The SSD's sets (CBSR + Y) are smaller than cuSPARSE's (X + Y): more of them may be needed.
    // Y sets are shared by both; room is left for the CBSR sets of the largest k.
    const auto k_min = *std::min_element(o.ks.begin(), o.ks.end());
    const auto k_max = *std::max_element(o.ks.begin(), o.ks.end());
    const auto ssd_wanted =
        wanted_sets(static_cast<double>(a.num_cols * k_min * 6 + a.num_rows * dim * 4), l2);
    const auto y_sets = fitting_sets(
        y_stride * sizeof(float) + static_cast<std::size_t>(a.num_cols * k_max * 6) + 512,
        std::max(xy_sets, ssd_wanted));
    Sets y{y_sets, y_stride, bench::DeviceArray(y_stride * y_sets)};
    bench::fill_uniform(x.data.data(), x.data.size(), o.run.seed, -1.0f, 1.0f, stream);
    bench::synchronize(stream);
    fmt::print("{} X set(s), {} Y set(s) of {:.1f} MiB each\n", x.count, y.count,
               static_cast<double>(y_stride * sizeof(float)) / double(1 << 20));
    return {std::move(x), std::move(y), a.num_rows, a.num_cols, dim};
}

// cuSPARSE at d = D on the dense X: checked, then timed. `xs`: the X rows the checked rows read.
MeasuredRow measure_cusparse(const MaxkOptions& o, SpmmPlan& cusparse, const XySets& xy,
                             const Csr& a, const CheckSet& cs, const std::vector<float>& xs,
                             double copy_gb_per_s, cudaStream_t stream)
{
    const auto dim = o.dim;
    MeasuredRow out;
    out.name = "cusparse";
    out.params["dim"] = dim;
    {
        xy.poison(0, stream);
        cusparse.run(xy.x_view(0), xy.y_view(0), {0, a.num_rows});
        const auto got = gather_rows(xy.y_view(0), cs.rows, stream);
        const auto ref = dense_reference(cs, xs, dim);
        std::vector<double> terms(cs.rows.size());
        for (std::size_t r = 0; r < cs.rows.size(); ++r) {
            terms[r] = 2.0 * static_cast<double>(cs.sub.row_nnz(static_cast<std::int64_t>(r))) + 2;
        }
        out.check = row_check(compare(got, ref.values, ref.scale, terms, dim));
    }
    out.time = time_launch_sets(o.run, stream, std::min(xy.x.count, xy.y.count), [&](auto s) {
        cusparse.run(xy.x_view(s), xy.y_view(s), {0, a.num_rows});
    });
    out.set_compulsory_bytes((a.num_rows + 1) * 8 + a.nnz() * (a.has_values() ? 8 : 4) +
                                 (a.num_cols + a.num_rows) * dim * 4,
                             copy_gb_per_s);
    out.set_checked_status();
    print_row(out);
    return out;
}

// CBSR sets of one k: the top-k of X set s % |X| goes to CBSR set s.
CbsrSets make_cbsr_sets(cuda::Context& ctx, const XySets& xy, const Csr& a, std::int64_t k,
                        std::int64_t l2, cudaStream_t stream)
{
    const auto dim = xy.dim;
    CbsrSets cb;
    cb.value_stride = aligned_floats(a.num_cols * k);
    cb.index_stride = aligned_floats((a.num_cols * k + 1) / 2) * 2;
    const std::size_t cb_bytes = cb.value_stride * 4 + cb.index_stride * 2;
    cb.count = std::min(
        fitting_sets(cb_bytes,
                     wanted_sets(double(a.num_cols * k * 6 + a.num_rows * dim * 4), l2)),
        xy.y.count);
    cb.values = bench::DeviceArray(cb.value_stride * cb.count);
    cb.indices = bench::DeviceArray(cb.index_stride * cb.count / 2);
    auto cbsr = [&](std::int64_t s) { return cb.view(s, a.num_cols, dim, k); };
    for (std::int64_t s = 0; s < cb.count; ++s) {
        cuda::maxk_topk(ctx, xy.x_view(s), cbsr(s));
    }
    bench::synchronize(stream);
    return cb;
}

// The top-k of one k: its CBSR rows of the checked columns (copied into `checked`) compared bit
// for bit against the reference, then timed.
MeasuredRow measure_topk(const MaxkOptions& o, cuda::Context& ctx, const XySets& xy,
                         const CbsrSets& cb, const Csr& a, const CheckSet& cs,
                         const std::vector<float>& xs, std::int64_t k, double copy_gb_per_s,
                         Cbsr& checked)
{
    const auto dim = o.dim;
    const auto stream = ctx.compute_stream();
    auto cbsr = [&](std::int64_t s) { return cb.view(s, a.num_cols, dim, k); };
    // Top-k check: the CBSR rows of the checked columns, bit for bit against the reference.
    Cbsr host(a.num_cols, dim, k);
    HALO_CUDA_TRY(cudaMemcpy(host.values.data(), cbsr(0).values, host.values.size() * 4,
                             cudaMemcpyDeviceToHost));
    HALO_CUDA_TRY(cudaMemcpy(host.indices.data(), cbsr(0).indices, host.indices.size() * 2,
                             cudaMemcpyDeviceToHost));
    const auto want = reference::maxk_topk(
        dense_view<const float>(xs.data(), static_cast<std::int64_t>(cs.columns.size()), dim),
        k);
    MeasuredRow tr;
    tr.name = "topk";
    tr.params["k"] = k;
    tr.check.unit = "rows";
    tr.check.checked = static_cast<std::int64_t>(cs.columns.size());
    for (std::size_t r = 0; r < cs.columns.size(); ++r) {
        bool same = true;
        for (std::int64_t t = 0; t < k; ++t) {
            const auto src = cs.columns[r] * k + t;
            const auto dst = static_cast<std::int64_t>(r) * k + t;
            checked.values[dst] = host.values[src];
            checked.indices[dst] = host.indices[src];
            same = same && host.indices[src] == want.indices[dst] &&
                   std::bit_cast<std::uint32_t>(host.values[src]) ==
                       std::bit_cast<std::uint32_t>(want.values[dst]);
        }
        tr.check.bad += same ? 0 : 1;
    }
    tr.time = time_launch_sets(o.run, stream, cb.count,
                               [&](auto s) { cuda::maxk_topk(ctx, xy.x_view(s), cbsr(s)); });
    tr.set_compulsory_bytes(a.num_cols * (dim * 4 + k * 6), copy_gb_per_s);
    tr.set_checked_status();
    print_row(tr);
    return tr;
}

// The SSD of one k in every group size, order, variant and buffer count, each checked against
// the reference of the (verified) CBSR rows `checked` and timed; prints each row as it comes and
// appends it to `records`.
void measure_ssd(const MaxkOptions& o, SsdPlans& plans, const std::vector<SsdOrder>& orders,
                 const std::vector<SsdVariant>& variants, const XySets& xy, const CbsrSets& cb,
                 const Csr& a, const CheckSet& cs, const Cbsr& checked, std::int64_t k,
                 const MeasuredRow& cusparse, double copy_gb_per_s, cudaStream_t stream,
                 std::vector<MeasuredRow>& records)
{
    const auto dim = o.dim;
    auto cbsr = [&](std::int64_t s) { return cb.view(s, a.num_cols, dim, k); };
    // The SSD reference of the checked rows from the (verified) CBSR of their columns.
    const auto ref = cbsr_reference(cs, checked);
    for (const auto g : o.group_sizes) {
        auto& plan = *plans[g];
        const auto& groups = plan.groups();
        std::vector<double> terms(cs.rows.size());
        for (std::size_t r = 0; r < cs.rows.size(); ++r) {
            const auto n = a.row_nnz(cs.rows[r]);
            const auto count = std::max<std::int64_t>(1, (n + g - 1) / g);
            terms[r] = static_cast<double>(std::min<std::int64_t>(n, g) + count + 2);
        }
        const auto bytes = groups.size() * 16 + a.nnz() * (a.has_values() ? 8 : 4) +
                           a.num_cols * k * 6 + a.num_rows * dim * 4;
        double maxk_rows_ms = 0;
        for (const auto order : orders) {
            const auto order_name = cuda::to_string(order);
            double maxk_ms = 0;
            for (const auto v : variants) {
                const auto buffer_list =
                    has_slots(v) ? o.buffers : std::vector<std::int32_t>{0};
                for (const auto b : buffer_list) {
                    MeasuredRow rec;
                    rec.name_key = "variant";
                    rec.name = cuda::to_string(v);
                    rec.params = {{"k", k},
                                  {"group_size", g},
                                  {"order", order_name},
                                  {"buffers_per_warp", b > 0 ? Json(b) : Json(nullptr)},
                                  {"config", ""}};
                    const SsdLaunch launch{v, o.warps_per_block, std::max(b, 1), order};
                    try {
                        rec.params["config"] = plan.describe(launch, dim, k);
                        xy.poison(0, stream);
                        plan.run(cbsr(0), xy.y_view(0), {0, a.num_rows}, launch);
                        rec.check = row_check(compare(gather_rows(xy.y_view(0), cs.rows, stream),
                                                      ref.values, ref.scale, terms, dim));
                        rec.time = time_launch_sets(o.run, stream, cb.count, [&](auto s) {
                            plan.run(cbsr(s), xy.y_view(s), {0, a.num_rows}, launch);
                        });
                        rec.set_checked_status();
                        rec.set_compulsory_bytes(bytes, copy_gb_per_s);
                    } catch (const Error& e) {
                        rec.status = "ERROR";
                        rec.message = e.message();
                    }
                    if (rec.timed() && v == SsdVariant::maxk) {
                        maxk_ms = rec.time.ms.median;
                        if (order == SsdOrder::rows) {
                            maxk_rows_ms = maxk_ms;
                        }
                    }
                    rec.add_ratio("speedup_vs_maxk", "vs maxk", maxk_ms);
                    rec.add_ratio("speedup_vs_maxk_rows", "vs maxk (rows)", maxk_rows_ms);
                    rec.add_ratio("speedup_vs_cusparse", "vs cusparse", cusparse.time.ms.median);
                    print_row(rec);
                    records.push_back(rec);
                }
            }
        }
    }
}

int run_maxk(const MaxkOptions& o, const std::string& command)
{
    const auto date = utc_now_iso();
    check_options(o);
    const auto variants = variants_in_order(o);
    const auto orders = orders_in_order(o);
    const auto dim = o.dim;

    check_before_device(o.run, o.graph);
    BenchDevice device(o.run.device);
    auto& ctx = device.ctx;
    const auto stream = ctx.compute_stream();
    const double copy_gb_per_s = device.copy_gb_per_s();

    app::Stopwatch load_time;
    const auto graph = load_graph(o.graph);
    const auto& a = graph.csr;
    fmt::print("graph {}: {} rows, {} nonzeros ({}), degree avg {:.2f} max {} ({:.1f} s)\n",
               graph.source, a.num_rows, a.nnz(), a.has_values() ? "float32 values" : "pattern",
               static_cast<double>(a.nnz()) / static_cast<double>(a.num_rows),
               max_row_nnz(a.view()), load_time.seconds());

    // Plans: cuSPARSE at d = D, one SSD plan (upload + edge groups) per group size.
    app::Stopwatch setup;
    auto cusparse_plan = cuda::make_cusparse_spmm_plan(ctx, a, dim);
    auto plans = make_ssd_plans(ctx, a, o);
    ctx.synchronize();
    fmt::print("plans ready in {:.1f} ms\n", setup.seconds() * 1e3);

    const auto cs = make_check_set(a, o.run.check_rows, o.run.seed);
    fmt::print("checking {} rows{}\n", cs.rows.size(),
               cs.sampled ? " (a seeded sample plus the first, last and longest)" : " (all)");

    const auto xy = make_xy_sets(device, a, o, stream);

    // The inputs of the checks: X rows the checked rows read (set 0).
    const auto xs = gather_rows(xy.x_view(0), cs.columns, stream);
    const auto cusparse = measure_cusparse(o, *cusparse_plan, xy, a, cs, xs, copy_gb_per_s, stream);

    std::vector<MeasuredRow> topk_records;
    std::vector<MeasuredRow> records;
    for (const auto k : o.ks) {
        const auto cb = make_cbsr_sets(ctx, xy, a, k, device.info.l2_cache_bytes, stream);
        Cbsr checked(static_cast<std::int64_t>(cs.columns.size()), dim, k);
        topk_records.push_back(measure_topk(o, ctx, xy, cb, a, cs, xs, k, copy_gb_per_s, checked));
        measure_ssd(o, plans, orders, variants, xy, cb, a, cs, checked, k, cusparse, copy_gb_per_s,
                    stream, records);
    }

    // The tables, then the summary: geomean over k of each variant's speed-up against the MaxK
    // baseline and cuSPARSE.
    print_table({cusparse});
    print_table(topk_records,
                "topk: a row is wrong when its k values or indices differ bit for "
                "bit from the reference's");
    print_table(records,
                "check: |y - ref| <= terms * eps * sum |products| per element "
                "(docs/MAXK.md)");
    auto summary = print_summary(o, records);
    const auto failures =
        count_failures(records) + count_failures(topk_records) + count_failures({cusparse});
    fmt::print("\n{}: {} failed check(s) or error(s)\n", failures ? "FAILED" : "ok", failures);
    if (!o.run.json.empty()) {
        write_report(o, {"halo-bench maxk", date, command, &device, &graph, &o.graph}, cs, cusparse,
                     topk_records, records, std::move(summary));
    }
    return failures ? 3 : 0;
}

}  // namespace
}  // namespace maxk

void add_maxk_command(CLI::App& app, const std::string& command, int& exit_code)
{
    using maxk::MaxkOptions;
    auto o = std::make_shared<MaxkOptions>();
    auto* cmd =
        add_mode(app, "maxk",
                 "MaxK-GNN kernels (docs/MAXK.md): top-k into CBSR, then the SSD aggregation (MaxK "
                 "baseline, decoupled, ablations) against cuSPARSE SpMM at d = D, each checked",
                 o, &maxk::run_maxk, command, exit_code);
    add_graph_options(*cmd, o->graph);
    cmd->add_option("--dim", o->dim, "unpruned embedding width D")->capture_default_str();
    cmd->add_option("--ks", o->ks, "k values (kept entries per row), comma-separated")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--group-sizes", o->group_sizes, "edge group sizes, comma-separated")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--buffers-per-warp", o->buffers,
                    "buffers (slots) per warp of the slotted variants, comma-separated (a sweep)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--orders", o->orders,
                    "group orders, comma-separated: rows (MaxK's), longest_first (each order "
                    "runs every variant, its own MaxK baseline first)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--variants", o->variants,
                    "maxk, decoupled, no_slots, no_atomic_aware, no_slots_no_atomic_aware "
                    "(maxk always runs as the baseline)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--warps-per-block", o->warps_per_block, "warps of a thread block")
        ->capture_default_str();
    add_kernel_run_options(*cmd, o->run, "seed of X and of the checked-row sample");
}

}  // namespace halo::bench_app
