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
#include "halo/backend.hpp"
#include "halo/cuda/backend.hpp"
#include "bench_util.hpp"
#include "halo/cuda/context.hpp"
#include "halo/cuda/maxk.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"
#include "halo/io.hpp"
#include "halo/maxk.hpp"
#include "halo/spmm.hpp"

namespace halo::bench_app {
namespace {

namespace bench = halo::cuda::bench;
using halo::cuda::SsdLaunch;
using halo::cuda::SsdOrder;
using halo::cuda::SsdVariant;

struct MaxkOptions {
    GraphOptions graph;
    std::int64_t dim = 256;
    std::vector<std::int64_t> ks{2, 4, 8, 16, 32, 64};
    std::vector<std::int32_t> group_sizes{64};
    std::vector<std::int32_t> buffers{4};  // SsdLaunch's default
    std::vector<std::string> orders{"rows", "longest_first"};
    std::vector<std::string> variants{"maxk", "decoupled", "no_slots", "no_atomic_aware",
                                      "no_slots_no_atomic_aware"};
    std::int32_t warps_per_block = 12;
    KernelRunOptions run;
};

// ---------------------------------------------------------------------------------------------
// Checks: the checked rows as a CSR of their own over the columns they read (renumbered), so the
// references need only those rows of X and of the CBSR.

struct Check {
    std::int64_t elements = 0;
    std::int64_t bad = 0;
    std::int64_t nonfinite = 0;
    double max_rel_error = 0;  // max |y - ref| / sum |terms|
};

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

// ---------------------------------------------------------------------------------------------
// Records.

struct SsdRecord {
    std::int64_t k = 0;
    std::int32_t group_size = 0;
    std::string order;
    std::string variant;
    std::int32_t buffers = 0;  // 0: the variant has no slots
    std::string config;
    std::string status;  // ok | FAILED | ERROR
    std::string message;
    Timing time;
    Check check;
    std::int64_t compulsory_bytes = 0;
    double roofline_fraction = 0;
    double vs_maxk = 0;       // the MaxK baseline in the same order
    double vs_maxk_rows = 0;  // the MaxK baseline in row order (the paper's), when measured
    double vs_cusparse = 0;
};

struct TopkRecord {
    std::int64_t k = 0;
    Timing time;
    std::int64_t checked_rows = 0;
    std::int64_t mismatched_rows = 0;
    double roofline_fraction = 0;
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

int run_maxk(const MaxkOptions& o, const std::string& command)
{
    const auto date = utc_now_iso();
    check_options(o);
    std::vector<SsdVariant> variants;
    for (const auto& v : o.variants) {
        variants.push_back(cuda::parse_ssd_variant(v));
    }
    if (std::find(variants.begin(), variants.end(), SsdVariant::maxk) == variants.end()) {
        variants.push_back(SsdVariant::maxk);
        fmt::print("maxk runs as the baseline of every comparison\n");
    }
    // The baseline first, so that every other variant's speed-up is known when it is printed.
    std::stable_partition(variants.begin(), variants.end(),
                          [](SsdVariant v) { return v == SsdVariant::maxk; });
    variants.erase(std::unique(variants.begin(), variants.end()), variants.end());
    // Row order first, so that every record of the other order knows the paper's baseline.
    std::vector<SsdOrder> orders;
    for (const auto& name : o.orders) {
        orders.push_back(cuda::parse_ssd_order(name));
    }
    std::stable_partition(orders.begin(), orders.end(),
                          [](SsdOrder order) { return order == SsdOrder::rows; });
    orders.erase(std::unique(orders.begin(), orders.end()), orders.end());
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
    auto cusparse = cuda::make_cusparse_spmm_plan(ctx, a, dim);
    std::map<std::int32_t, std::unique_ptr<cuda::DeviceSsdPlan>> plans;
    for (const auto g : o.group_sizes) {
        cuda::SsdOptions options;
        options.groups.group_size = g;
        options.launch.warps_per_block = o.warps_per_block;
        plans[g] = cuda::make_ssd_plan(ctx, a, dim, options);
        const auto& groups = plans[g]->groups();
        const auto shared = std::count(groups.update_mode.begin(), groups.update_mode.end(), 1);
        fmt::print("edge groups of {}: {} groups, {:.1f}% of them in shared rows\n", g,
                   groups.size(), 100.0 * static_cast<double>(shared) / double(groups.size()));
    }
    ctx.synchronize();
    fmt::print("plans ready in {:.1f} ms\n", setup.seconds() * 1e3);

    const auto cs = make_check_set(a, o.run.check_rows, o.run.seed);
    fmt::print("checking {} rows{}\n", cs.rows.size(),
               cs.sampled ? " (a seeded sample plus the first, last and longest)" : " (all)");

    // X and Y sets (X: n_cols x D, Y: n_rows x D), for cuSPARSE, the top-k and the SSD outputs.
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

    auto x_view = [&](std::int64_t s) {
        return DenseView<const float>{x.set(s), a.num_cols, dim, dim};
    };
    auto y_view = [&](std::int64_t s) { return DenseView<float>{y.set(s), a.num_rows, dim, dim}; };
    constexpr float nan = std::numeric_limits<float>::quiet_NaN();
    auto poison = [&](std::int64_t s) {
        bench::fill_value(y.set(s), static_cast<std::size_t>(a.num_rows * dim), nan, stream);
    };
    int failures = 0;

    // The inputs of the checks: X rows the checked rows read (set 0).
    const auto xs = gather_rows(x_view(0), cs.columns, stream);

    // cuSPARSE at d = D on the dense X: checked, then timed.
    Check cusparse_check;
    {
        poison(0);
        cusparse->run(x_view(0), y_view(0), {0, a.num_rows});
        const auto got = gather_rows(y_view(0), cs.rows, stream);
        const auto ref = dense_reference(cs, xs, dim);
        std::vector<double> terms(cs.rows.size());
        for (std::size_t r = 0; r < cs.rows.size(); ++r) {
            terms[r] = 2.0 * static_cast<double>(cs.sub.row_nnz(static_cast<std::int64_t>(r))) + 2;
        }
        cusparse_check = compare(got, ref.values, ref.scale, terms, dim);
    }
    const auto cusparse_time =
        time_launch_sets(o.run, stream, std::min(x.count, y.count), [&](auto s) {
            cusparse->run(x_view(s), y_view(s), {0, a.num_rows});
        });
    const auto dense_bytes = (a.num_rows + 1) * 8 + a.nnz() * (a.has_values() ? 8 : 4) +
                             (a.num_cols + a.num_rows) * dim * 4;
    fmt::print("cusparse d = {}: median {:.4f} ms, {} bad of {} checked elements\n", dim,
               cusparse_time.ms.median, cusparse_check.bad, cusparse_check.elements);
    failures += cusparse_check.bad > 0 ? 1 : 0;

    std::vector<TopkRecord> topk_records;
    std::vector<SsdRecord> records;
    for (const auto k : o.ks) {
        // CBSR sets: the top-k of X set s % |X| goes to CBSR set s.
        CbsrSets cb;
        cb.value_stride = aligned_floats(a.num_cols * k);
        cb.index_stride = aligned_floats((a.num_cols * k + 1) / 2) * 2;
        const std::size_t cb_bytes = cb.value_stride * 4 + cb.index_stride * 2;
        cb.count = std::min(
            fitting_sets(cb_bytes,
                         wanted_sets(double(a.num_cols * k * 6 + a.num_rows * dim * 4), l2)),
            y.count);
        cb.values = bench::DeviceArray(cb.value_stride * cb.count);
        cb.indices = bench::DeviceArray(cb.index_stride * cb.count / 2);
        auto cbsr = [&](std::int64_t s) { return cb.view(s, a.num_cols, dim, k); };
        for (std::int64_t s = 0; s < cb.count; ++s) {
            cuda::maxk_topk(ctx, x_view(s), cbsr(s));
        }
        bench::synchronize(stream);

        // Top-k check: the CBSR rows of the checked columns, bit for bit against the reference.
        Cbsr host(a.num_cols, dim, k);
        HALO_CUDA_TRY(cudaMemcpy(host.values.data(), cbsr(0).values, host.values.size() * 4,
                                 cudaMemcpyDeviceToHost));
        HALO_CUDA_TRY(cudaMemcpy(host.indices.data(), cbsr(0).indices, host.indices.size() * 2,
                                 cudaMemcpyDeviceToHost));
        const auto want = reference::maxk_topk(
            dense_view<const float>(xs.data(), static_cast<std::int64_t>(cs.columns.size()), dim),
            k);
        TopkRecord tr;
        tr.k = k;
        tr.checked_rows = static_cast<std::int64_t>(cs.columns.size());
        Cbsr checked(static_cast<std::int64_t>(cs.columns.size()), dim, k);
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
            tr.mismatched_rows += same ? 0 : 1;
        }
        tr.time = time_launch_sets(o.run, stream, cb.count,
                                   [&](auto s) { cuda::maxk_topk(ctx, x_view(s), cbsr(s)); });
        tr.roofline_fraction = double(a.num_cols) * double(dim * 4 + k * 6) /
                               (tr.time.ms.median * 1e6) / copy_gb_per_s;
        fmt::print(
            "k = {}: top-k median {:.4f} ms ({:.1f}% of copy), {} of {} checked rows "
            "differ\n",
            k, tr.time.ms.median, 100.0 * tr.roofline_fraction, tr.mismatched_rows,
            tr.checked_rows);
        failures += tr.mismatched_rows > 0 ? 1 : 0;
        topk_records.push_back(tr);

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
                        SsdRecord rec;
                        rec.k = k;
                        rec.group_size = g;
                        rec.order = order_name;
                        rec.variant = cuda::to_string(v);
                        rec.buffers = b;
                        const SsdLaunch launch{v, o.warps_per_block, std::max(b, 1), order};
                        try {
                            rec.config = plan.describe(launch, dim, k);
                            poison(0);
                            plan.run(cbsr(0), y_view(0), {0, a.num_rows}, launch);
                            rec.check = compare(gather_rows(y_view(0), cs.rows, stream), ref.values,
                                                ref.scale, terms, dim);
                            rec.time = time_launch_sets(o.run, stream, cb.count, [&](auto s) {
                                plan.run(cbsr(s), y_view(s), {0, a.num_rows}, launch);
                            });
                            rec.status = rec.check.bad > 0 ? "FAILED" : "ok";
                        } catch (const Error& e) {
                            rec.status = "ERROR";
                            rec.message = e.message();
                        }
                        if (rec.status == "ERROR") {
                            fmt::print("  {} g {} b {} {}: ERROR: {}\n", rec.variant, g, b,
                                       order_name, rec.message);
                            ++failures;
                            records.push_back(rec);
                            continue;
                        }
                        failures += rec.status == "ok" ? 0 : 1;
                        rec.compulsory_bytes = bytes;
                        rec.roofline_fraction =
                            double(bytes) / (rec.time.ms.median * 1e6) / copy_gb_per_s;
                        if (v == SsdVariant::maxk) {
                            maxk_ms = rec.time.ms.median;
                            if (order == SsdOrder::rows) {
                                maxk_rows_ms = maxk_ms;
                            }
                        }
                        rec.vs_maxk = maxk_ms > 0 ? maxk_ms / rec.time.ms.median : 0;
                        rec.vs_maxk_rows = maxk_rows_ms > 0 ? maxk_rows_ms / rec.time.ms.median : 0;
                        rec.vs_cusparse = cusparse_time.ms.median / rec.time.ms.median;
                        fmt::print(
                            "  k {:>3} g {:>4} {:<26} {:<29} median {:>9.4f} ms  {:>5.1f}% copy  "
                            "vs maxk {:>5.2f}x  vs maxk (rows) {:>5.2f}x  vs cusparse {:>6.2f}x  "
                            "bad "
                            "{} of {}: {}\n",
                            k, g, rec.variant + (b > 0 ? fmt::format(" b{}", b) : ""), rec.config,
                            rec.time.ms.median, 100.0 * rec.roofline_fraction, rec.vs_maxk,
                            rec.vs_maxk_rows, rec.vs_cusparse, rec.check.bad, rec.check.elements,
                            rec.status);
                        std::fflush(stdout);
                        records.push_back(rec);
                    }
                }
            }
        }
    }

    // Summary: geomean over k of each variant's speed-up against the MaxK baseline and cuSPARSE.
    fmt::print("\ncusparse SpMM at d = {}: median {:.4f} ms ({:.1f}% of copy)\n", dim,
               cusparse_time.ms.median,
               100.0 * double(dense_bytes) / (cusparse_time.ms.median * 1e6) / copy_gb_per_s);
    fmt::print("{:<6} {:<14} {:<34} {:>16} {:>22} {:>20}\n", "group", "order", "variant",
               "geomean vs maxk", "geomean vs maxk (rows)", "geomean vs cusparse");
    Json summary = Json::array();
    for (const auto g : o.group_sizes) {
        struct Speedups {
            std::vector<double> maxk, maxk_rows, cusparse;
        };
        std::map<std::pair<std::string, std::string>, Speedups> by;
        std::vector<std::pair<std::string, std::string>> seen;
        for (const auto& r : records) {
            if (r.group_size != g || r.status == "ERROR") {
                continue;
            }
            const std::pair<std::string, std::string> key{
                r.order, r.variant + (r.buffers > 0 ? fmt::format(" b{}", r.buffers) : "")};
            if (by.find(key) == by.end()) {
                seen.push_back(key);
            }
            auto& s = by[key];
            if (r.vs_maxk > 0) {
                s.maxk.push_back(r.vs_maxk);
            }
            if (r.vs_maxk_rows > 0) {
                s.maxk_rows.push_back(r.vs_maxk_rows);
            }
            s.cusparse.push_back(r.vs_cusparse);
        }
        for (const auto& key : seen) {
            const auto& s = by[key];
            const auto gm = geomean(s.maxk);
            const auto gr = s.maxk_rows.empty() ? 0.0 : geomean(s.maxk_rows);
            const auto gc = geomean(s.cusparse);
            fmt::print("{:<6} {:<14} {:<34} {:>15.3f}x {:>21.3f}x {:>19.3f}x\n", g, key.first,
                       key.second, gm, gr, gc);
            summary.push_back(
                {{"group_size", g},
                 {"order", key.first},
                 {"variant", key.second},
                 {"geomean_vs_maxk", gm},
                 {"geomean_vs_maxk_rows", s.maxk_rows.empty() ? Json(nullptr) : Json(gr)},
                 {"geomean_vs_cusparse", gc},
                 {"ks", o.ks}});
        }
    }
    fmt::print("\n{}: {} failed check(s) or error(s)\n", failures ? "FAILED" : "ok", failures);

    if (!o.run.json.empty()) {
        Json doc = provenance_json("halo-bench maxk", date, command);
        doc["device"] = device.device_json();
        doc["graph"] = graph_json(graph, o.graph);
        doc["copy_bandwidth"] = device.copy_json();
        doc["settings"] = {{"dim", dim},
                           {"ks", o.ks},
                           {"group_sizes", o.group_sizes},
                           {"buffers_per_warp", o.buffers},
                           {"orders", o.orders},
                           {"warps_per_block", o.warps_per_block},
                           {"warmup", o.run.warmup},
                           {"runs", o.run.runs},
                           {"seed", o.run.seed},
                           {"check_rows", cs.rows.size()},
                           {"check_sampled", cs.sampled}};
        doc["cusparse"] = {
            {"dim", dim},
            {"time_ms", stats_json(cusparse_time.ms)},
            {"buffer_sets", cusparse_time.sets},
            {"compulsory_bytes", dense_bytes},
            {"check",
             {{"elements", cusparse_check.elements}, {"bad_elements", cusparse_check.bad}}}};
        Json topk = Json::array();
        for (const auto& t : topk_records) {
            topk.push_back({{"k", t.k},
                            {"time_ms", stats_json(t.time.ms)},
                            {"buffer_sets", t.time.sets},
                            {"roofline_fraction", t.roofline_fraction},
                            {"checked_rows", t.checked_rows},
                            {"mismatched_rows", t.mismatched_rows}});
        }
        doc["topk"] = std::move(topk);
        Json list = Json::array();
        for (const auto& r : records) {
            Json j{{"k", r.k},
                   {"group_size", r.group_size},
                   {"order", r.order},
                   {"variant", r.variant},
                   {"buffers_per_warp", r.buffers > 0 ? Json(r.buffers) : Json(nullptr)},
                   {"config", r.config},
                   {"status", r.status}};
            if (r.status == "ERROR") {
                j["message"] = r.message;
            } else {
                j["time_ms"] = stats_json(r.time.ms);
                j["buffer_sets"] = r.time.sets;
                j["compulsory_bytes"] = r.compulsory_bytes;
                j["roofline_fraction"] = r.roofline_fraction;
                j["speedup_vs_maxk"] = r.vs_maxk;
                j["speedup_vs_maxk_rows"] =
                    r.vs_maxk_rows > 0 ? Json(r.vs_maxk_rows) : Json(nullptr);
                j["speedup_vs_cusparse"] = r.vs_cusparse;
                j["check"] = {{"elements", r.check.elements},
                              {"bad_elements", r.check.bad},
                              {"nonfinite_elements", r.check.nonfinite},
                              {"max_rel_error", r.check.max_rel_error}};
            }
            list.push_back(std::move(j));
        }
        doc["ssd"] = std::move(list);
        doc["summary"] = std::move(summary);
        write_json(o.run.json, doc);
    }
    return failures ? 3 : 0;
}

}  // namespace

void add_maxk_command(CLI::App& app, const std::string& command, int& exit_code)
{
    auto o = std::make_shared<MaxkOptions>();
    auto* cmd =
        add_mode(app, "maxk",
                 "MaxK-GNN kernels (docs/MAXK.md): top-k into CBSR, then the SSD aggregation (MaxK "
                 "baseline, decoupled, ablations) against cuSPARSE SpMM at d = D, each checked",
                 o, &run_maxk, command, exit_code);
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
