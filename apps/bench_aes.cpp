// halo-bench aes: AES-SpMM (paper 004, docs/AES.md) on one graph and one GPU, per sample width W
// and dense width d, with fp32 and/or int8 features, against cuSPARSE SpMM in the same run.
//
// For each d: seeded fp32 features X (and their per-column int8 quantization), cuSPARSE on X as
// the baseline and as the exact result, the exact int8 kernel, then AES at every W. Before
// timing, each kernel's output (NaN-poisoned first) is compared with the CPU reference on the
// checked rows (all rows of small graphs, a seeded sample of large ones): AES and int8 bit for
// bit on rows the kernel sums as one chain (the reference samples the same nonzeros and sums them
// in the same order), within the tolerance of two summation orders on rows it may split into
// pieces, cuSPARSE within the project's tolerance. Timings are medians of CUDA-event-timed runs
// after warm-up, rotating among enough buffer sets that consecutive runs do not find their inputs
// in L2. Reported per W: the speed-up over cuSPARSE and the relative Frobenius error ||Y_aes -
// Y_exact|| / ||Y_exact|| against cuSPARSE's fp32 result (for int8 features it includes the
// quantization error, which the exact int8 kernel's line isolates). Exit code: 0 all checks passed,
// 1 an error stopped the run, 3 a check failed.
#include "bench_aes.hpp"

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
#include <utility>
#include <vector>

#include "app_common.hpp"
#include "bench_common.hpp"
#include "bench_util.hpp"
#include "halo/core/error.hpp"
#include "halo/core/io.hpp"
#include "halo/kernels/cuda/aes.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/spmm.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo::bench_app {
namespace aes {
namespace {

namespace bench = halo::cuda::bench;

constexpr std::int64_t kMaxSets = 64;

// ---------------------------------------------------------------------------------------------
// The checked rows as a CSR of their own: each row keeps its nonzeros in order (so AES samples
// the same positions), columns renumbered to the rows of X they read.

// Rows of at most this many slots are never cut into pieces (every layout stages at least 128
// slots per group): the kernel sums them as one chain in slot order, as the reference does.
constexpr std::int64_t kNeverSplit = 128;

// Against the CPU reference of the same sampling: bit for bit for rows of at most kNeverSplit
// slots (a NaN, the poison, is never equal); longer rows, which the kernel may sum piece by
// piece, within 32 eps of mag (the sum of |products|): the bound of two summation orders of
// random-signed terms, far below one product of a wrong or missing nonzero.
Check compare_sampled(const std::vector<float>& got, const std::vector<float>& want,
                      const std::vector<float>& mag, const std::vector<std::int64_t>& slots,
                      std::int64_t dim)
{
    constexpr double eps = std::numeric_limits<float>::epsilon();
    Check c;
    for (std::size_t e = 0; e < got.size(); ++e) {
        ++c.elements;
        const double d = std::fabs(static_cast<double>(got[e]) - want[e]);
        const bool ok = slots[e / static_cast<std::size_t>(dim)] <= kNeverSplit
                            ? got[e] == want[e]
                            : d <= 32.0 * eps * mag[e];
        if (!ok) {
            ++c.bad;
            c.max_abs_diff = std::isnan(d) ? d : std::max(c.max_abs_diff, d);
        }
    }
    return c;
}

std::vector<float> abs_of(std::vector<float> v)
{
    for (auto& x : v) {
        x = std::fabs(x);
    }
    return v;
}

// Within k * eps * sum|terms| per element, k = min(2 row_nnz, 32) (the rule of halo-bench's SpMM
// mode: two summation orders of random-signed terms).
Check compare_tolerance(const std::vector<float>& got, const Csr& sub, const std::vector<float>& xs,
                        std::int64_t dim)
{
    constexpr double eps = std::numeric_limits<float>::epsilon();
    Check c;
    for (std::int64_t i = 0; i < sub.num_rows; ++i) {
        std::vector<double> ref(static_cast<std::size_t>(dim), 0.0);
        std::vector<double> scale(static_cast<std::size_t>(dim), 0.0);
        for (auto p = sub.indptr[i]; p < sub.indptr[i + 1]; ++p) {
            const double v = sub.has_values() ? sub.values[p] : 1.0;
            for (std::int64_t j = 0; j < dim; ++j) {
                const double t = v * xs[sub.indices[p] * dim + j];
                ref[j] += t;
                scale[j] += std::fabs(t);
            }
        }
        const double k = std::min<double>(2.0 * static_cast<double>(sub.row_nnz(i)), 32.0);
        for (std::int64_t j = 0; j < dim; ++j) {
            ++c.elements;
            const double d = std::fabs(static_cast<double>(got[i * dim + j]) - ref[j]);
            if (!(d <= k * eps * scale[j])) {
                ++c.bad;
            }
            c.max_abs_diff = std::isnan(d) ? d : std::max(c.max_abs_diff, d);
        }
    }
    return c;
}

// ---------------------------------------------------------------------------------------------
// Inputs of one width: host X and its quantization, and device buffer sets rotated between runs.

std::uint64_t splitmix64(std::uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in [-1, 1) from a counter-based hash: the same values for any thread count.
std::vector<float> host_uniform(std::size_t count, std::uint64_t seed)
{
    std::vector<float> v(count);
    const std::uint64_t key = splitmix64(seed);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(count); ++i) {
        const auto bits = splitmix64(key ^ static_cast<std::uint64_t>(i)) >> 40;  // 24 bits
        v[i] = -1.0f + 2.0f * static_cast<float>(bits) * 0x1.0p-24f;
    }
    return v;
}

std::size_t round_up(std::size_t n, std::size_t to)
{
    return (n + to - 1) / to * to;
}

struct Inputs {
    std::int64_t dim = 0;
    std::vector<float> x;  // num_cols x dim, host
    QuantizedMatrix q;     // its int8 quantization (empty without int8 features)
    std::int64_t sets = 1;
    std::size_t x_stride = 0;  // floats
    std::size_t q_stride = 0;  // bytes
    std::size_t y_stride = 0;  // floats
    bench::DeviceArray x_sets;
    cuda::DeviceBuffer<std::int8_t> q_sets;
    cuda::DeviceBuffer<float> scale;
    cuda::DeviceBuffer<std::int32_t> zero_point;
    bench::DeviceArray y_sets;
    bench::DeviceArray y_exact;

    const float* x_set(std::int64_t s) const { return x_sets.data() + (s % sets) * x_stride; }
    float* y_set(std::int64_t s) const { return y_sets.data() + (s % sets) * y_stride; }
    QuantizedView q_set(std::int64_t s, std::int64_t rows) const
    {
        return {
            q_sets.data() + (s % sets) * q_stride, rows, dim, dim, scale.data(), zero_point.data()};
    }
};

Inputs make_inputs(cuda::Context& ctx, const Csr& a, std::int64_t dim, bool int8,
                   std::int64_t l2_bytes, std::uint64_t seed)
{
    Inputs in;
    in.dim = dim;
    const auto x_count = static_cast<std::size_t>(a.num_cols * dim);
    const auto y_count = static_cast<std::size_t>(a.num_rows * dim);
    in.x = host_uniform(x_count, seed);
    if (int8) {
        in.q = quantize_columns(dense_view<const float>(in.x.data(), a.num_cols, dim),
                                "the benchmark's features");
    }
    in.x_stride = round_up(x_count, 64);
    in.q_stride = int8 ? round_up(x_count, 256) : 0;
    in.y_stride = round_up(y_count, 64);
    const double set_bytes = 4.0 * double(in.x_stride) + double(in.q_stride) + 4.0 * in.y_stride;
    const auto wanted = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::ceil(2.0 * double(l2_bytes) / set_bytes)), 1, kMaxSets);
    const auto free = bench::free_device_memory();
    // The exact result and one set are needed; more sets only while they fit.
    const double fixed = 4.0 * double(y_count) + double(kReserveBytes);
    const auto fit = free > fixed ? static_cast<std::int64_t>((free - fixed) / set_bytes) : 0;
    if (fit < 1) {
        HALO_THROW(CudaError, "d = ", dim, ": one buffer set of ", app::format_bytes(set_bytes),
                   " and the exact result do not fit in ", app::format_bytes(double(free)),
                   " of free device memory");
    }
    in.sets = std::min(wanted, fit);
    in.x_sets = bench::DeviceArray(in.x_stride * in.sets);
    in.y_sets = bench::DeviceArray(in.y_stride * in.sets);
    in.y_exact = bench::DeviceArray(y_count);
    const cudaStream_t stream = ctx.compute_stream();
    for (std::int64_t s = 0; s < in.sets; ++s) {
        HALO_CUDA_TRY(cudaMemcpyAsync(in.x_sets.data() + s * in.x_stride, in.x.data(),
                                      x_count * sizeof(float), cudaMemcpyHostToDevice, stream));
    }
    if (int8) {
        in.q_sets = cuda::DeviceBuffer<std::int8_t>(ctx, in.q_stride * in.sets);
        for (std::int64_t s = 0; s < in.sets; ++s) {
            HALO_CUDA_TRY(cudaMemcpyAsync(in.q_sets.data() + s * in.q_stride, in.q.data.data(),
                                          x_count, cudaMemcpyHostToDevice, stream));
        }
        validate(in.q, "the benchmark's features");
        in.scale = cuda::DeviceBuffer<float>(ctx, in.q.scale.size());
        in.zero_point = cuda::DeviceBuffer<std::int32_t>(ctx, in.q.zero_point.size());
        HALO_CUDA_TRY(cudaMemcpyAsync(in.scale.data(), in.q.scale.data(), in.scale.bytes(),
                                      cudaMemcpyHostToDevice, stream));
        HALO_CUDA_TRY(cudaMemcpyAsync(in.zero_point.data(), in.q.zero_point.data(),
                                      in.zero_point.bytes(), cudaMemcpyHostToDevice, stream));
    }
    bench::synchronize(stream);
    return in;
}

// ---------------------------------------------------------------------------------------------
// Records.

MeasuredRow make_record(std::string kernel, std::string features, std::int64_t w,
                        std::string scaling, std::int64_t dim)
{
    MeasuredRow r;
    r.name = std::move(kernel);
    r.params = {{"features", std::move(features)},
                {"w", w > 0 ? Json(w) : Json(nullptr)},
                {"scaling", std::move(scaling)},
                {"dim", dim}};
    return r;
}

// The report's check: elements and bad_elements, max_abs_diff and the rule that judged them.
RowCheck row_check(const Check& c, bool tolerance)
{
    return {"elements", c.elements, c.bad,
            Json{{"max_abs_diff", c.max_abs_diff},
                 {"rule", tolerance ? "tolerance" : "bit-exact up to 128 slots, else tolerance"}}};
}

// The compulsory bytes of one SpMM: the row offsets, the staged nonzeros (column, and value
// unless a pattern), every feature row once (int8 with its per-column parameters, or fp32) and
// the output once.
std::int64_t compulsory_bytes(const Csr& a, std::int64_t staged, std::int64_t dim, bool int8)
{
    const std::int64_t matrix = (a.num_rows + 1) * 8 + staged * (4 + (a.has_values() ? 4 : 0));
    const std::int64_t features = int8 ? a.num_cols * dim + 8 * dim : 4 * a.num_cols * dim;
    return matrix + features + 4 * a.num_rows * dim;
}

// One dense width d of the run: its inputs (make_inputs), the checked rows' features and
// references, and the kernels measured on them, each row printed and appended to `records`.
struct WidthRun {
    WidthRun(const AesBenchOptions& o_, cuda::Context& ctx_, const Csr& a_, const CheckSet& cs_,
             const Csr& sub_abs_, std::int64_t dim_, bool want_int8_, std::int64_t l2_bytes,
             double copy_, std::vector<MeasuredRow>& records_)
        : o(o_), ctx(ctx_), a(a_), cs(cs_), sub_abs(sub_abs_), dim(dim_), want_int8(want_int8_),
          copy(copy_), records(records_), stream(ctx_.compute_stream()),
          in(make_inputs(ctx_, a_, dim_, want_int8_, l2_bytes, o_.run.seed + dim_))
    {
        fmt::print("\nd = {}: {} buffer set(s)\n", dim, in.sets);
        // The checked rows' features, packed in cs.columns order, for the references.
        xs.resize(cs.columns.size() * static_cast<std::size_t>(dim));
        qs.rows = static_cast<std::int64_t>(cs.columns.size());
        qs.cols = dim;
        qs.scale = in.q.scale;
        qs.zero_point = in.q.zero_point;
        for (std::size_t c = 0; c < cs.columns.size(); ++c) {
            std::copy_n(in.x.begin() + cs.columns[c] * dim, dim, xs.begin() + c * dim);
            if (want_int8) {
                qs.data.insert(qs.data.end(), in.q.data.begin() + cs.columns[c] * dim,
                               in.q.data.begin() + (cs.columns[c] + 1) * dim);
            }
        }
        want.resize(cs.rows.size() * static_cast<std::size_t>(dim));
        // Magnitudes for the tolerance of split rows: the same sampling over |A| and |X| (the
        // dequantized |X| for int8 features).
        xs_abs = abs_of(xs);
        xq_abs.resize(xs.size());
        if (want_int8) {
            dequantize(qs.view(), dense_view(xq_abs.data(), qs.rows, dim));
            xq_abs = abs_of(std::move(xq_abs));
        }
        mag.resize(want.size());
    }
    WidthRun(const WidthRun&) = delete;
    WidthRun& operator=(const WidthRun&) = delete;

    DenseView<const float> xs_view() const
    {
        return dense_view<const float>(xs.data(), cs.sub.num_cols, dim);
    }
    DenseView<float> want_view() { return dense_view(want.data(), cs.sub.num_rows, dim); }
    DenseView<float> mag_view() { return dense_view(mag.data(), cs.sub.num_rows, dim); }

    std::vector<std::int64_t> slots_per_row(std::int64_t w) const
    {
        std::vector<std::int64_t> slots(static_cast<std::size_t>(cs.sub.num_rows));
        for (std::int64_t i = 0; i < cs.sub.num_rows; ++i) {
            const auto nnz = cs.sub.row_nnz(i);
            slots[i] = w > 0 ? aes_row_strategy(nnz, w).count() : nnz;
        }
        return slots;
    }

    void finish(MeasuredRow& rec, std::int64_t staged, bool int8, double baseline_ms)
    {
        rec.set_compulsory_bytes(compulsory_bytes(a, staged, dim, int8), copy);
        rec.add_ratio("speedup_vs_cusparse", "vs cusparse", baseline_ms);
        rec.set_checked_status();
        print_row(rec);
        records.push_back(rec);
    }

    double frobenius(const float* y) const
    {
        const auto s = cuda::frobenius_sums(ctx, {y, a.num_rows, dim, dim},
                                            {in.y_exact.data(), a.num_rows, dim, dim});
        return s.ref_sq > 0 ? std::sqrt(s.diff_sq / s.ref_sq) : std::sqrt(s.diff_sq);
    }

    // cuSPARSE: the baseline, and the exact result every error is measured against; returns
    // its median time.
    double run_cusparse(SpmmPlan& cusparse)
    {
        auto base = make_record("cusparse", "fp32", 0, "-", dim);
        bench::fill_value(in.y_exact.data(), in.y_exact.size(), NAN, stream);
        cusparse.run({in.x_set(0), a.num_cols, dim, dim},
                      {in.y_exact.data(), a.num_rows, dim, dim}, {0, a.num_rows});
        bench::check_last_error();
        base.check =
            row_check(compare_tolerance(
                          gather_rows({in.y_exact.data(), a.num_rows, dim, dim}, cs.rows, stream),
                          cs.sub, xs, dim),
                      true);
        base.measured["rel_frobenius_error_vs_exact_fp32"] = 0.0;  // it is the exact result
        base.time = time_launch_sets(o.run, stream, in.sets, [&](std::int64_t s) {
            cusparse.run({in.x_set(s), a.num_cols, dim, dim}, {in.y_set(s), a.num_rows, dim, dim},
                          {0, a.num_rows});
        });
        const double baseline_ms = base.time.ms.median;
        finish(base, a.nnz(), false, baseline_ms);
        return baseline_ms;
    }

    // The exact int8 kernel (isolates the quantization error).
    void run_int8_exact(double baseline_ms)
    {
        auto rec = make_record("int8-exact", "int8", 0, "-", dim);
        const auto plan = cuda::make_int8_spmm_plan(ctx, a, dim);
        bench::fill_value(in.y_set(0), in.y_stride, NAN, stream);
        plan->run(in.q_set(0, a.num_cols), {in.y_set(0), a.num_rows, dim, dim},
                  {0, a.num_rows});
        bench::check_last_error();
        reference::spmm_int8(cs.sub.view(), qs.view(), want_view(), cs.sub.view().all_rows());
        reference::spmm(sub_abs.view(), dense_view<const float>(xq_abs.data(), qs.rows, dim),
                        mag_view());
        rec.check = row_check(
            compare_sampled(gather_rows({in.y_set(0), a.num_rows, dim, dim}, cs.rows, stream), want,
                            mag, slots_per_row(0), dim),
            false);
        rec.measured["rel_frobenius_error_vs_exact_fp32"] = frobenius(in.y_set(0));
        rec.time = time_launch_sets(o.run, stream, in.sets, [&](std::int64_t s) {
            plan->run(in.q_set(s, a.num_cols), {in.y_set(s), a.num_rows, dim, dim},
                      {0, a.num_rows});
        });
        finish(rec, a.nnz(), true, baseline_ms);
    }

    // AES at one W and scaling on fp32 or int8 features (`staged`: the nonzeros it stages).
    void run_aes_kernel(std::int64_t w, AesScaling scaling, bool int8, std::int64_t staged,
                        double baseline_ms)
    {
        const AesOptions options{w, scaling};
        auto rec = make_record("aes", int8 ? "int8" : "fp32", w, to_string(scaling), dim);
        try {
            std::unique_ptr<SpmmPlan> fp32_plan;
            std::unique_ptr<cuda::Int8SpmmPlan> int8_plan;
            if (int8) {
                int8_plan = cuda::make_aes_int8_spmm_plan(ctx, a, dim, options);
            } else {
                fp32_plan = cuda::make_aes_spmm_plan(ctx, a, dim, options);
            }
            auto launch = [&](std::int64_t s) {
                const DenseView<float> y{in.y_set(s), a.num_rows, dim, dim};
                if (int8) {
                    int8_plan->run(in.q_set(s, a.num_cols), y, {0, a.num_rows});
                } else {
                    fp32_plan->run({in.x_set(s), a.num_cols, dim, dim}, y,
                                   {0, a.num_rows});
                }
            };
            bench::fill_value(in.y_set(0), in.y_stride, NAN, stream);
            launch(0);
            bench::check_last_error();
            const auto all = cs.sub.view().all_rows();
            if (int8) {
                reference::aes_spmm(cs.sub.view(), qs.view(), want_view(), all, options);
            } else {
                reference::aes_spmm(cs.sub.view(), xs_view(), want_view(), all, options);
            }
            reference::aes_spmm(
                sub_abs.view(),
                dense_view<const float>(int8 ? xq_abs.data() : xs_abs.data(),
                                        cs.sub.num_cols, dim),
                mag_view(), all, options);
            rec.check = row_check(
                compare_sampled(gather_rows({in.y_set(0), a.num_rows, dim, dim}, cs.rows, stream),
                                want, mag, slots_per_row(w), dim),
                false);
            rec.measured["rel_frobenius_error_vs_exact_fp32"] = frobenius(in.y_set(0));
            rec.time = time_launch_sets(o.run, stream, in.sets, launch);
            finish(rec, staged, int8, baseline_ms);
        } catch (const Error& e) {
            rec.status = "ERROR";
            rec.message = e.message();
            print_row(rec);
            records.push_back(rec);
        }
    }

    const AesBenchOptions& o;
    cuda::Context& ctx;
    const Csr& a;
    const CheckSet& cs;
    const Csr& sub_abs;
    const std::int64_t dim;
    const bool want_int8;
    const double copy;
    std::vector<MeasuredRow>& records;
    const cudaStream_t stream;
    const Inputs in;
    std::vector<float> xs;  // the checked rows' features, packed in cs.columns order
    QuantizedMatrix qs;     // and their int8 quantization
    std::vector<float> want;  // the reference of the checked rows
    std::vector<float> xs_abs;  // |X| and the dequantized |X| of int8 features
    std::vector<float> xq_abs;
    std::vector<float> mag;  // the sampled sums of |products|, for split rows' tolerance
};

int run_aes(const AesBenchOptions& o, const std::string& command)
{
    const auto date = utc_now_iso();
    const bool want_fp32 = o.features != "int8";
    const bool want_int8 = o.features != "fp32";
    std::vector<AesScaling> scalings;
    for (const auto& s : o.scalings) {
        scalings.push_back(parse_aes_scaling(s));
    }
    for (const auto w : o.ws) {
        validate(AesOptions{w, AesScaling::sample_sum});
    }
    for (const auto d : o.dims) {
        if (d < 1) {
            HALO_THROW(InputError, "--dims: width ", d, " must be at least 1");
        }
    }

    check_before_device(o.run, o.graph);
    BenchDevice device(o.run.device);
    auto& ctx = device.ctx;
    fmt::print("device {}: {} ({} SMs, L2 {}), copy bandwidth {:.0f} GB/s\n", device.info.index,
               device.info.name, device.info.multiprocessors,
               app::format_bytes(double(device.info.l2_cache_bytes)), device.copy_gb_per_s());

    const auto graph = load_graph(o.graph);
    const Csr& a = graph.csr;
    fmt::print("graph {}: {} rows, {} nonzeros, max row {} nonzeros, {}\n", graph.source,
               a.num_rows, a.nnz(), max_row_nnz(a.view()), a.has_values() ? "valued" : "pattern");
    const auto cs = make_check_set(a, o.run.check_rows, o.run.seed + 1);
    Csr sub_abs = cs.sub;
    sub_abs.values = abs_of(std::move(sub_abs.values));
    fmt::print("checking {} rows{}\n", cs.rows.size(), cs.sampled ? " (seeded sample)" : "");

    // How much of the graph each W keeps (the paper's Fig. 5).
    std::vector<AesSampleStats> stats;
    fmt::print("{:>6} {:>14} {:>14} {:>10} {:>10}\n", "W", "sampled rows", "staged", "staged %",
               "distinct %");
    for (const auto w : o.ws) {
        stats.push_back(aes_sample_stats(a.view(), a.view().all_rows(), w));
        const auto& s = stats.back();
        fmt::print("{:>6} {:>14} {:>14} {:>9.2f}% {:>9.2f}%\n", w, s.sampled_rows, s.slots,
                   100.0 * s.slot_fraction(), 100.0 * s.distinct_fraction());
    }

    const auto max_dim = *std::max_element(o.dims.begin(), o.dims.end());
    const auto cusparse = cuda::make_cusparse_spmm_plan(ctx, a, max_dim);
    std::vector<MeasuredRow> records;
    const double copy = device.copy_gb_per_s();

    for (const auto dim : o.dims) {
        WidthRun width(o, ctx, a, cs, sub_abs, dim, want_int8, device.info.l2_cache_bytes, copy,
                       records);
        const double baseline_ms = width.run_cusparse(*cusparse);
        if (want_int8) {
            width.run_int8_exact(baseline_ms);
        }
        for (std::size_t wi = 0; wi < o.ws.size(); ++wi) {
            for (const auto scaling : scalings) {
                for (const bool int8 : {false, true}) {
                    if ((int8 && !want_int8) || (!int8 && !want_fp32)) {
                        continue;
                    }
                    width.run_aes_kernel(o.ws[wi], scaling, int8, stats[wi].slots, baseline_ms);
                }
            }
        }
    }

    print_table(records,
                "check: cusparse against the CPU reference within the tolerance; the "
                "others bit-exact up to 128 slots per row, else within the tolerance "
                "(docs/AES.md)");
    print_summary(o, records);
    const auto failures = count_failures(records);
    fmt::print("\n{}: {} failed check(s) or error(s)\n", failures ? "FAILED" : "ok", failures);
    if (!o.run.json.empty()) {
        write_report(o, {"halo-bench aes", date, command, &device, &graph, &o.graph}, cs, stats,
                     records);
    }
    return failures ? 3 : 0;
}

}  // namespace
}  // namespace aes

void add_aes_command(CLI::App& app, const std::string& command, int& exit_code)
{
    using aes::AesBenchOptions;
    auto o = std::make_shared<AesBenchOptions>();
    auto* cmd = add_mode(
        app, "aes",
        "AES-SpMM (docs/AES.md): sampled SpMM per W with fp32 and int8 features, and the exact "
        "int8 SpMM, against cuSPARSE in the same run; each checked against the CPU sampling "
        "reference; speed-up and relative Frobenius error per W",
        o, &aes::run_aes, command, exit_code);
    add_graph_options(*cmd, o->graph);
    cmd->add_option("--dims", o->dims, "dense widths d, comma-separated")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--ws", o->ws, "sample widths W (16 to 1024), comma-separated")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--features", o->features, "fp32 | int8 | both")
        ->check(CLI::IsMember({"fp32", "int8", "both"}))
        ->capture_default_str();
    cmd->add_option("--scaling", o->scalings,
                    "sample_sum (the paper's) and/or rescaled, comma-separated")
        ->delimiter(',')
        ->check(CLI::IsMember({"sample_sum", "rescaled"}))
        ->capture_default_str();
    add_kernel_run_options(*cmd, o->run, "seed of X and of the checked-row sample");
}

}  // namespace halo::bench_app
