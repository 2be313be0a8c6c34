// halo-bench attention: sparse attention O = softmax_row(mask(Q K^T * scale)) V on one graph and
// one GPU (docs/FUSED3S.md): the fused Fused3S kernel against the unfused fp32 baseline (SDDMM,
// row softmax, cuSPARSE SpMM) in the same run.
//
// It builds the BSB on the host (timed), then for each width d: fills seeded Q, K, V sets, checks
// both kernels on NaN-poisoned outputs against the fp64 CPU reference on a seeded sample of rows
// (all rows of small graphs): Fused3S per-row relative error at most 1e-2, the baseline within
// 1e-5 of max |V|; then times each with CUDA events after warm-up (median of `runs`), rotating
// among enough input/output sets that consecutive runs do not find their data in L2. Fused3S is
// timed on fp16 inputs (the kernel) and from fp32 inputs (conversion included). --ablation adds
// the four settings of row-window reordering and register remapping. Exit code: 0 all checks
// passed, 1 an error stopped the run, 3 a check failed.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "app_common.hpp"
#include "bench_common.hpp"
#include "bench_report.hpp"
#include "bench_util.hpp"
#include "halo/core/error.hpp"
#include "halo/core/io.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/fused3s.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/attention.hpp"
#include "halo/kernels_host/fused3s.hpp"

namespace halo::bench_app {
namespace {

namespace bench = halo::cuda::bench;

constexpr double kFusedTolerance = 1e-2;
constexpr double kUnfusedTolerance = 1e-5;

struct AttentionOptions {
    GraphOptions graph;
    std::vector<std::int64_t> dims{64, 128};
    double scale = 0;  // 0: 1 / sqrt(d)
    bool ablation = false;
    KernelRunOptions run;
};

// ---------------------------------------------------------------------------------------------
// Checked rows: a seeded sample (or all rows), and the sub-pattern over the columns they read.

struct Check {
    std::int64_t rows = 0;
    std::int64_t bad_rows = 0;
    std::int64_t nonfinite = 0;
    double max_row_rel_error = 0;  // max_i ||O_i - R_i|| / ||R_i||
    double frobenius_rel_error = 0;
    double max_abs_error = 0;
    std::int64_t worst_row = -1;
};

// got (checked rows, packed) against ref. Fused: a row is bad when its relative error exceeds
// `row_tol`; baseline: when an element differs by more than `abs_tol`. Rows without a nonzero
// must be exactly zero.
Check compare(const CheckSet& cs, const std::vector<float>& got, const std::vector<double>& ref,
              std::int64_t d, double row_tol, double abs_tol)
{
    Check c;
    double err_sq = 0;
    double ref_sq = 0;
    for (std::int64_t r = 0; r < cs.sub.num_rows; ++r) {
        ++c.rows;
        double row_err = 0;
        double row_ref = 0;
        bool bad = false;
        for (std::int64_t j = 0; j < d; ++j) {
            const float g = got[r * d + j];
            const double w = ref[r * d + j];
            if (!std::isfinite(g)) {
                ++c.nonfinite;
                bad = true;
                continue;
            }
            if (cs.sub.row_nnz(r) == 0 && g != 0.0f) {
                bad = true;
            }
            const double diff = std::fabs(g - w);
            c.max_abs_error = std::max(c.max_abs_error, diff);
            bad = bad || diff > abs_tol;
            row_err += diff * diff;
            row_ref += w * w;
        }
        err_sq += row_err;
        ref_sq += row_ref;
        const double rel = row_ref > 0 ? std::sqrt(row_err / row_ref) : std::sqrt(row_err);
        if (rel > c.max_row_rel_error) {
            c.max_row_rel_error = rel;
            c.worst_row = cs.rows[r];
        }
        bad = bad || rel > row_tol;
        c.bad_rows += bad ? 1 : 0;
    }
    c.frobenius_rel_error = ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq);
    return c;
}

RowCheck row_check(const Check& c)
{
    return {"rows", c.rows, c.bad_rows,
            Json{{"nonfinite_elements", c.nonfinite},
                 {"max_row_rel_error", c.max_row_rel_error},
                 {"frobenius_rel_error", c.frobenius_rel_error},
                 {"max_abs_error", c.max_abs_error},
                 {"worst_row", c.worst_row}}};
}

// ---------------------------------------------------------------------------------------------
// Buffer sets: Q, K, V (fp32 and fp16) and O of one set side by side, sets rotated between runs.

struct Sets {
    std::int64_t count = 0;
    std::int64_t n = 0;  // rows of Q and O
    std::int64_t m = 0;  // rows of K and V
    std::int64_t d = 0;
    std::size_t q = 0;  // offsets (in floats) inside a set
    std::size_t k = 0;
    std::size_t v = 0;
    std::size_t o = 0;
    std::size_t q16 = 0;
    std::size_t k16 = 0;
    std::size_t v16 = 0;
    std::size_t stride = 0;
    bench::DeviceArray data;

    Sets(std::int64_t rows, std::int64_t cols, std::int64_t dim, std::int64_t l2_bytes)
        : n(rows), m(cols), d(dim)
    {
        q = 0;
        k = q + aligned_floats(n * d);
        v = k + aligned_floats(m * d);
        o = v + aligned_floats(m * d);
        q16 = o + aligned_floats(n * d);
        k16 = q16 + aligned_floats((n * d + 1) / 2);
        v16 = k16 + aligned_floats((m * d + 1) / 2);
        stride = v16 + aligned_floats((m * d + 1) / 2);
        // The smallest timed footprint (fp16 inputs and the output) over twice the L2.
        const double timed_bytes = double((n + 2 * m) * d) * 2 + double(n * d) * 4;
        count = fitting_sets(stride * sizeof(float), wanted_sets(timed_bytes, l2_bytes));
        data = bench::DeviceArray(stride * static_cast<std::size_t>(count));
    }

    float* base(std::int64_t s) const { return data.data() + (s % count) * stride; }
    DenseView<float> f32(std::int64_t s, std::size_t offset, std::int64_t rows) const
    {
        return {base(s) + offset, rows, d, d};
    }
    DenseView<__half> f16(std::int64_t s, std::size_t offset, std::int64_t rows) const
    {
        return {reinterpret_cast<__half*>(base(s) + offset), rows, d, d};
    }
    DenseView<const float> cq(std::int64_t s) const { return f32(s, q, n); }
    DenseView<const float> ck(std::int64_t s) const { return f32(s, k, m); }
    DenseView<const float> cv(std::int64_t s) const { return f32(s, v, m); }
    DenseView<float> out(std::int64_t s) const { return f32(s, o, n); }
    DenseView<const __half> hq(std::int64_t s) const { return as_const(f16(s, q16, n)); }
    DenseView<const __half> hk(std::int64_t s) const { return as_const(f16(s, k16, m)); }
    DenseView<const __half> hv(std::int64_t s) const { return as_const(f16(s, v16, m)); }

    static DenseView<const __half> as_const(DenseView<__half> x)
    {
        return {x.data, x.rows, x.cols, x.ld};
    }
};

// A row of kernel (fused3s | fused3s+convert | unfused) and d, with the fused kernel's
// settings: {"d", "reorder_windows", "remap_registers"}.
MeasuredRow make_row(const std::string& kernel, std::int64_t d)
{
    MeasuredRow row;
    row.name = kernel;
    row.params["d"] = d;
    return row;
}

std::string variant_name(const MeasuredRow& r)
{
    if (r.name == "unfused") {
        return r.name;
    }
    return fmt::format("{} (reorder {}, remap {})", r.name,
                       r.params["reorder_windows"].get<bool>() ? "on" : "off",
                       r.params["remap_registers"].get<bool>() ? "on" : "off");
}

// One setting of the fused kernel's row-window reordering and register remapping.
struct Setting {
    bool reorder;
    bool remap;
};

// One width d: seeded Q, K, V sets, the reference of the checked rows, then the unfused baseline
// and the fused kernel in every setting, each checked and timed; appends to `records`, prints
// each as it comes.
void measure_width(const AttentionOptions& o, cuda::Context& ctx, const Csr& a, const CheckSet& cs,
                   std::int64_t d, cuda::Fused3sPlan& plan, cuda::UnfusedAttentionPlan& baseline,
                   const std::vector<Setting>& settings, std::int64_t bsb_bytes,
                   std::int64_t l2_bytes, double copy_gb_per_s, std::vector<MeasuredRow>& records)
{
    const auto stream = ctx.compute_stream();
    constexpr float nan = std::numeric_limits<float>::quiet_NaN();
    auto* fused = &plan;
    auto* unfused = &baseline;
    const float scale =
        o.scale > 0 ? static_cast<float>(o.scale) : 1.0f / std::sqrt(static_cast<float>(d));
    Sets sets(a.num_rows, a.num_cols, d, l2_bytes);
    for (std::int64_t s = 0; s < sets.count; ++s) {
        const auto seed = o.run.seed + 1000 * static_cast<std::uint64_t>(d) + 3 * s;
        bench::fill_uniform(sets.base(s) + sets.q, static_cast<std::size_t>(a.num_rows * d),
                            seed, -1.0f, 1.0f, stream);
        bench::fill_uniform(sets.base(s) + sets.k, static_cast<std::size_t>(a.num_cols * d),
                            seed + 1, -1.0f, 1.0f, stream);
        bench::fill_uniform(sets.base(s) + sets.v, static_cast<std::size_t>(a.num_cols * d),
                            seed + 2, -1.0f, 1.0f, stream);
        cuda::convert_to_half(sets.cq(s), sets.f16(s, sets.q16, a.num_rows), stream);
        cuda::convert_to_half(sets.ck(s), sets.f16(s, sets.k16, a.num_cols), stream);
        cuda::convert_to_half(sets.cv(s), sets.f16(s, sets.v16, a.num_cols), stream);
    }
    bench::synchronize(stream);
    fmt::print("\nd = {}: scale {:.6g}, {} buffer set(s) of {:.1f} MiB\n", d, scale, sets.count,
               double(sets.stride * sizeof(float)) / double(1 << 20));

    // The reference of the checked rows, from set 0's inputs.
    const auto qs = gather_rows(sets.cq(0), cs.rows, stream);
    const auto ks = gather_rows(sets.ck(0), cs.columns, stream);
    const auto vs = gather_rows(sets.cv(0), cs.columns, stream);
    std::vector<double> ref(cs.rows.size() * static_cast<std::size_t>(d));
    reference::sparse_attention(cs.sub.view(), dense_view(qs.data(), cs.sub.num_rows, d),
                                dense_view(ks.data(), cs.sub.num_cols, d),
                                dense_view(vs.data(), cs.sub.num_cols, d), scale,
                                dense_view(ref.data(), cs.sub.num_rows, d));
    double max_v = 1.0;
    for (const auto x : vs) {
        max_v = std::max(max_v, double(std::fabs(x)));
    }
    auto poison = [&] {
        bench::fill_value(sets.out(0).data, static_cast<std::size_t>(a.num_rows * d), nan,
                          stream);
    };
    const std::int64_t n = a.num_rows;

    // The baseline first, so every fused record has its speed-up when printed.
    auto base = make_row("unfused", d);
    try {
        poison();
        unfused->run(sets.cq(0), sets.ck(0), sets.cv(0), scale, sets.out(0), {0, n});
        base.check =
            row_check(compare(cs, gather_rows(sets.out(0), cs.rows, stream), ref, d,
                              std::numeric_limits<double>::infinity(), kUnfusedTolerance * max_v));
        base.time = time_launch_sets(o.run, stream, sets.count, [&](std::int64_t s) {
            unfused->run(sets.cq(s), sets.ck(s), sets.cv(s), scale, sets.out(s), {0, n});
        });
        base.set_checked_status();
        base.set_compulsory_bytes((n + 1) * 8 + a.nnz() * 4 + (2 * a.num_cols + 2 * n) * d * 4,
                                  copy_gb_per_s);
    } catch (const Error& e) {
        base.status = "ERROR";
        base.message = e.message();
    }
    const double base_ms = base.status == "ERROR" ? 0 : base.time.ms.median;
    base.add_ratio("speedup_vs_unfused", "vs unfused", base_ms);
    print_row(base);
    records.push_back(base);

    for (const auto& setting : settings) {
        for (const bool convert : {false, true}) {
            if (convert && !(setting.reorder && setting.remap)) {
                continue;  // the conversion is timed once, with the default kernel
            }
            auto rec = make_row(convert ? "fused3s+convert" : "fused3s", d);
            rec.params["reorder_windows"] = setting.reorder;
            rec.params["remap_registers"] = setting.remap;
            fused->set_options({setting.reorder, setting.remap});
            auto launch = [&](std::int64_t s) {
                if (convert) {
                    cuda::fused_attention(*fused, sets.cq(s), sets.ck(s), sets.cv(s), scale,
                                          sets.out(s));
                } else {
                    fused->run(sets.hq(s), sets.hk(s), sets.hv(s), scale, sets.out(s), {0, n});
                }
            };
            try {
                poison();
                launch(0);
                rec.check =
                    row_check(compare(cs, gather_rows(sets.out(0), cs.rows, stream), ref, d,
                                      kFusedTolerance, std::numeric_limits<double>::infinity()));
                rec.time = time_launch_sets(o.run, stream, sets.count, launch);
                rec.set_checked_status();
                rec.set_compulsory_bytes(
                    (n + 2 * a.num_cols) * d * (convert ? 4 : 2) + n * d * 4 + bsb_bytes,
                    copy_gb_per_s);
                rec.add_ratio("speedup_vs_unfused", "vs unfused", base_ms);
            } catch (const Error& e) {
                rec.status = "ERROR";
                rec.message = e.message();
            }
            print_row(rec);
            records.push_back(rec);
        }
    }
    fused->set_options({});
}

// Geomean over the widths of each variant's speed-up against the baseline; returns its JSON.
Json print_summary(const AttentionOptions& o, const std::vector<MeasuredRow>& records)
{
    fmt::print("\n{:<40} {:>20}\n", "variant", "geomean vs unfused");
    Json summary = Json::array();
    std::vector<std::string> order;
    for (const auto& r : records) {
        const auto name = variant_name(r);
        if (r.name != "unfused" && std::find(order.begin(), order.end(), name) == order.end()) {
            order.push_back(name);
        }
    }
    for (const auto& name : order) {
        std::vector<double> speedups;
        for (const auto& r : records) {
            if (variant_name(r) == name && r.timed() && r.ratios.front().value) {
                speedups.push_back(*r.ratios.front().value);
            }
        }
        const auto gm = geomean(speedups);
        fmt::print("{:<40} {:>19.3f}x\n", name, gm);
        summary.push_back({{"variant", name}, {"geomean_vs_unfused", gm}, {"dims", o.dims}});
    }
    return summary;
}

// The JSON record: the report's header, then settings, bsb, results and summary.
void write_report(const AttentionOptions& o, const ReportHeader& header, const CheckSet& cs,
                  const BsbStats& stats, double bsb_seconds, std::int64_t bsb_bytes,
                  const std::vector<MeasuredRow>& records, Json summary)
{
    auto settings = run_settings(o.run, &cs);
    settings["dims"] = o.dims;
    settings["scale"] = o.scale > 0 ? Json(o.scale) : Json("1/sqrt(d)");
    settings["ablation"] = o.ablation;
    settings["fused_row_tolerance"] = kFusedTolerance;
    settings["unfused_tolerance"] = kUnfusedTolerance;
    Json bsb = {{"build_ms", bsb_seconds * 1e3},
                {"windows", stats.windows},
                {"blocks", stats.blocks},
                {"blocks_per_window", stats.blocks_per_window},
                {"blocks_per_window_cv", stats.blocks_per_window_cv},
                {"max_blocks_per_window", stats.max_blocks_per_window},
                {"nnz_per_block", stats.nnz_per_block},
                {"nnz_per_block_cv", stats.nnz_per_block_cv},
                {"fill", stats.fill},
                {"bytes", bsb_bytes}};
    bench_app::write_report(o.run.json, header, std::move(settings),
                            {{"bsb", std::move(bsb)},
                             {"results", rows_json(records)},
                             {"summary", std::move(summary)}});
}

int run_attention(const AttentionOptions& o, const std::string& command)
{
    const auto date = utc_now_iso();
    for (const auto d : o.dims) {
        if (!cuda::fused3s_supports_dim(d)) {
            HALO_THROW(InputError, "--dims: d = ", d,
                       " is not supported by the fused kernel (32, 64, 128, 256)");
        }
    }
    check_before_device(o.run, o.graph);
    BenchDevice device(o.run.device);
    auto& ctx = device.ctx;
    const double copy_gb_per_s = device.copy_gb_per_s();

    app::Stopwatch load_time;
    const auto graph = load_graph(o.graph);
    const auto& a = graph.csr;
    fmt::print("graph {}: {} rows, {} nonzeros, degree avg {:.2f} max {} ({:.1f} s)\n",
               graph.source, a.num_rows, a.nnz(),
               static_cast<double>(a.nnz()) / static_cast<double>(a.num_rows),
               max_row_nnz(a.view()), load_time.seconds());

    // The BSB, built on the host: the preprocessing a plan does once (or loads from the dataset).
    app::Stopwatch bsb_time;
    Bsb bsb = build_bsb(a);
    const double bsb_seconds = bsb_time.seconds();
    const auto stats = bsb_stats(bsb);
    fmt::print(
        "BSB built on the host in {:.1f} ms: {} windows, {} blocks; blocks/window avg "
        "{:.2f} (CV {:.2f}) max {}; nnz/block avg {:.2f} (CV {:.2f}); fill {:.1f}%\n",
        bsb_seconds * 1e3, stats.windows, stats.blocks, stats.blocks_per_window,
        stats.blocks_per_window_cv, stats.max_blocks_per_window, stats.nnz_per_block,
        stats.nnz_per_block_cv, 100.0 * stats.fill);
    const std::int64_t max_dim = *std::max_element(o.dims.begin(), o.dims.end());
    const std::int64_t bsb_bytes =
        stats.blocks * (8 * 4 + 2 * 8) + (stats.windows + 1) * 8 + stats.windows * 4;
    app::Stopwatch setup;
    auto fused = cuda::make_fused3s_plan(ctx, std::move(bsb), max_dim);
    auto unfused = cuda::make_unfused_attention_plan(ctx, a);
    ctx.synchronize();
    fmt::print("plans ready in {:.1f} ms\n", setup.seconds() * 1e3);

    const auto cs = make_check_set(a, o.run.check_rows, o.run.seed);
    fmt::print("checking {} rows{}\n", cs.rows.size(),
               cs.sampled ? " (a seeded sample plus the first, last and longest)" : " (all)");

    std::vector<Setting> settings{{true, true}};
    if (o.ablation) {
        settings = {{true, true}, {false, true}, {true, false}, {false, false}};
    }

    std::vector<MeasuredRow> records;
    for (const auto d : o.dims) {
        measure_width(o, ctx, a, cs, d, *fused, *unfused, settings, bsb_bytes,
                      device.info.l2_cache_bytes, copy_gb_per_s, records);
    }

    print_table(records, "check: a fused row is bad when its relative error exceeds " +
                             fmt::format("{}", kFusedTolerance) +
                             ", an unfused one when an element differs by more than " +
                             fmt::format("{} max|V|", kUnfusedTolerance));
    auto summary = print_summary(o, records);
    const auto failures = count_failures(records);
    fmt::print("\n{}: {} failed check(s) or error(s)\n", failures ? "FAILED" : "ok", failures);

    if (!o.run.json.empty()) {
        write_report(o, {"halo-bench attention", date, command, &device, &graph, &o.graph}, cs,
                     stats, bsb_seconds, bsb_bytes, records, std::move(summary));
    }
    return failures ? 3 : 0;
}

}  // namespace

void add_attention_command(CLI::App& app, const std::string& command, int& exit_code)
{
    auto o = std::make_shared<AttentionOptions>();
    auto* cmd = add_mode(
        app, "attention",
        "sparse attention (docs/FUSED3S.md): the fused Fused3S kernel (fp16, tensor cores) "
        "against the unfused fp32 baseline (SDDMM, row softmax, cuSPARSE SpMM), each checked",
        o, &run_attention, command, exit_code);
    add_graph_options(*cmd, o->graph);
    cmd->add_option("--dims", o->dims, "widths d of Q, K and V (32, 64, 128, 256), comma-separated")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--scale", o->scale, "score scale (0: 1 / sqrt(d))")->capture_default_str();
    cmd->add_flag("--ablation", o->ablation,
                  "also time the fused kernel without row-window reordering and/or register "
                  "remapping");
    add_kernel_run_options(*cmd, o->run, "seed of Q, K, V and of the checked-row sample");
}

}  // namespace halo::bench_app
