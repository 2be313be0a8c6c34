// halo-bench's SpMM mode (its top-level options; apps/halo_bench.cpp): the benchmark every SpMM
// kernel of HaloGNN is judged with (bench/README.md defines every number it prints).
//
// One graph, one GPU. It measures the device-to-device copy bandwidth first (the roofline), then
// for each dense width d and each kernel: checks the kernel against the CPU reference on a
// NaN-poisoned output, warms up, times `runs` launches one by one with CUDA events while rotating
// among enough input/output buffer sets that consecutive runs cannot be served from L2, and
// checks again on the last buffer set. cuSPARSE always runs as the baseline of the same run.
// Exit code: 0 every check passed, 1 an error stopped the run, 3 a kernel computed wrong values
// (FAILED) or could not run (ERROR).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app_common.hpp"
#include "bench_common.hpp"
#include "bench_util.hpp"
#include "halo/backend.hpp"
#include "halo/cuda/context.hpp"
#include "halo/cuda/device.hpp"
#include "halo/cuda/lowp_spmm.hpp"
#include "halo/cuda/mergepath.hpp"
#include "halo/cuda/rowsplit.hpp"
#include "halo/feature_type.hpp"
#include "halo/gather_model.hpp"
#include "halo/io.hpp"
#include "halo/model.hpp"
#include "halo/spmm.hpp"
#include "halo/spmm_registry.hpp"

namespace halo::bench_app {
namespace {

namespace bench = halo::cuda::bench;
using halo::cuda::Context;

// ---------------------------------------------------------------------------------------------
// Kernels by name: the SpMM kernel registry's halo-bench kernels (halo/spmm_registry.hpp), each
// with the factory that builds its plan (preprocessing included) for widths up to max_dim, and the
// merge-path cost sweep's.

// (context, operator, widest d, SpmmPlanRequest::l2_hints: halo-bench --l2-hints).
using PlanFactory =
    std::function<std::unique_ptr<halo::SpmmPlan>(Context&, const halo::Csr&, std::int64_t, bool)>;

struct KernelEntry {
    std::string name;
    std::string description;
    PlanFactory make;
};

const std::vector<KernelEntry>& bench_kernels()
{
    static const std::vector<KernelEntry> registry = [] {
        std::vector<KernelEntry> out;
        for (const auto* k : halo::spmm_kernels(halo::spmm_use_bench)) {
            out.push_back(
                {k->name, k->description,
                 [k](Context& ctx, const halo::Csr& a, std::int64_t max_dim, bool l2_hints) {
                     static const halo::SpmmPlanHints none;
                     halo::SpmmPlanRequest request{max_dim, none};
                     request.l2_hints = l2_hints;
                     return k->make(ctx, a, request);
                 }});
        }
        return out;
    }();
    return registry;
}

constexpr const char* kBaseline = "cusparse";

struct Options {
    GraphOptions graph;
    std::vector<std::int64_t> dims{32, 64, 128, 256};
    std::vector<std::string> kernels{kBaseline};
    // X's element type for every kernel but the baseline (cuSPARSE reads fp32 always).
    std::string feature_type = "fp32";
    // Extra "mergepath(cost=N)" kernels: the merge-path cost sweep.
    std::vector<std::int64_t> mergepath_costs;
    // Extra "rowchunk(length=N)" kernels: the chunked row-split's unit-length sweep.
    std::vector<std::int64_t> rowchunk_lengths;
    KernelRunOptions run;
    bool e2e = false;
    E2eOptions e2e_model;
    // Caches of the gather model in MiB (empty: the device's L2; a single 0: no model).
    std::vector<double> gather_cache_mib;
    // SpmmPlanRequest::l2_hints of the registry's kernels (auto, autotune, the MergePath ones).
    bool l2_hints = false;
};

// ---------------------------------------------------------------------------------------------
// The correctness check: which rows, their reference, and the comparison.

// The checked rows (bench_common.hpp) with |a_ik| of each, for the tolerance scale.
struct CheckSet : bench_app::CheckSet {
    std::vector<float> abs_values;  // |sub.values| (empty for a pattern matrix)
};

CheckSet make_check_set(const halo::Csr& a, std::int64_t sample_rows, std::uint64_t seed)
{
    CheckSet cs{bench_app::make_check_set(a, sample_rows, seed), {}};
    cs.abs_values.reserve(cs.sub.values.size());
    for (const float v : cs.sub.values) {
        cs.abs_values.push_back(std::fabs(v));
    }
    return cs;
}

// Reference values of the checked rows for one X, and the scale of each element's tolerance:
// s_ij = sum_k |a_ik| |x_kj|, the largest magnitude the sum can reach on the way.
struct Reference {
    std::vector<float> values;
    std::vector<float> scale;
};

// With a low-precision `type`, the reference reads X rounded to it on the host, exactly as the
// device conversion rounds it (halo::round_features), so only the fp32 summation order differs.
Reference make_reference(const CheckSet& cs, const float* x, std::int64_t x_rows, std::int64_t dim,
                         cudaStream_t stream, halo::FeatureType type = halo::FeatureType::fp32)
{
    auto xs = gather_rows({x, x_rows, dim, dim}, cs.columns, stream);
    halo::round_features(xs, type);
    Reference ref;
    ref.values.resize(cs.rows.size() * dim);
    ref.scale.resize(cs.rows.size() * dim);
    const auto sub_rows = cs.sub.num_rows;
    const auto sub_cols = cs.sub.num_cols;
    halo::reference::spmm(cs.sub.view(), halo::dense_view<const float>(xs.data(), sub_cols, dim),
                          halo::dense_view(ref.values.data(), sub_rows, dim));
    for (auto& v : xs) {
        v = std::fabs(v);
    }
    auto abs_view = cs.sub.view();
    abs_view.values = cs.abs_values.empty() ? nullptr : cs.abs_values.data();
    halo::reference::spmm(abs_view, halo::dense_view<const float>(xs.data(), sub_cols, dim),
                          halo::dense_view(ref.scale.data(), sub_rows, dim));
    return ref;
}

struct CheckResult {
    int runs = 0;           // checked runs (the first buffer set, and the last one if different)
    std::int64_t rows = 0;  // rows compared in each run
    std::int64_t elements = 0;
    std::int64_t bad = 0;           // outside the tolerance, or not finite
    std::int64_t nonfinite = 0;     // NaN (never written: the poison) or infinite
    double max_rel_error = 0;       // max |y - ref| / s over finite elements
    double max_tolerance_used = 0;  // max |y - ref| / tolerance (above 1: a bad element)
    double err_sq = 0;
    double ref_sq = 0;

    double rel_l2_error() const
    {
        return ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq);
    }
    void merge(const CheckResult& other)
    {
        runs += other.runs;
        rows = std::max(rows, other.rows);
        elements += other.elements;
        bad += other.bad;
        nonfinite += other.nonfinite;
        max_rel_error = std::max(max_rel_error, other.max_rel_error);
        max_tolerance_used = std::max(max_tolerance_used, other.max_tolerance_used);
        err_sq += other.err_sq;
        ref_sq += other.ref_sq;
    }
};

// The tolerance rule of the project (tests/common/halo_test.hpp: k * eps * scale). A float sum of
// n terms in any order lies within about n * eps * s of the exact value, so two orders differ by
// at most 2n * eps * s: that bound is used for short rows. For long rows the inputs' random signs
// make the rounding errors add like a random walk whose size stays near eps * s whatever n is, so
// k stops at 32: far above what any summation order reaches on random data, and still tight
// enough that one dropped or doubled nonzero shows up in rows of up to ~2^18 nonzeros.
constexpr double kMaxToleranceTerms = 32;

CheckResult compare(const CheckSet& cs, const Reference& ref, const std::vector<float>& y,
                    std::int64_t dim)
{
    constexpr double eps = std::numeric_limits<float>::epsilon();
    CheckResult result;
    result.runs = 1;
    result.rows = static_cast<std::int64_t>(cs.rows.size());
    for (std::int64_t r = 0; r < result.rows; ++r) {
        const double k = std::min(2.0 * cs.sub.row_nnz(r), kMaxToleranceTerms);
        for (std::int64_t j = 0; j < dim; ++j) {
            const auto e = r * dim + j;
            ++result.elements;
            if (!std::isfinite(y[e])) {
                ++result.nonfinite;
                ++result.bad;
                continue;
            }
            const double expected = ref.values[e];
            const double scale = ref.scale[e];
            const double diff = std::fabs(static_cast<double>(y[e]) - expected);
            const double tolerance = k * eps * scale;
            if (diff > tolerance) {
                ++result.bad;
            }
            if (diff > 0) {
                // An empty row has scale 0 and must be exactly 0: any difference is unbounded.
                constexpr double unbounded = std::numeric_limits<double>::max();
                result.max_rel_error =
                    std::max(result.max_rel_error, scale > 0 ? diff / scale : unbounded);
                result.max_tolerance_used = std::max(result.max_tolerance_used,
                                                     tolerance > 0 ? diff / tolerance : unbounded);
            }
            result.err_sq += diff * diff;
            result.ref_sq += expected * expected;
        }
    }
    return result;
}

// Poisons every element of y with NaN, runs the plan once over all rows (run_once), and compares
// the checked rows with the reference.
CheckResult checked_run(const std::function<void()>& run_once, const CheckSet& cs,
                        const Reference& ref, float* y, const halo::Csr& a, std::int64_t dim,
                        cudaStream_t stream)
{
    bench::fill_value(y, static_cast<std::size_t>(a.num_rows * dim),
                      std::numeric_limits<float>::quiet_NaN(), stream);
    run_once();
    return compare(cs, ref, gather_rows({y, a.num_rows, dim, dim}, cs.rows, stream), dim);
}

// ---------------------------------------------------------------------------------------------
// One record per (kernel, d).

struct Record {
    std::string kernel;
    std::string algorithm;
    std::string feature_type = "fp32";  // what the kernel read X as
    std::int64_t dim = 0;
    std::string status;  // ok | FAILED | ERROR | SKIPPED
    std::string message;
    std::int64_t sets = 0;
    std::int64_t set_bytes = 0;
    double setup_ms = 0;
    Stats ms;
    double gflops = 0;
    std::int64_t compulsory_bytes = 0;
    double gb_per_s = 0;
    double floor_ms = 0;
    double roofline_fraction = 0;
    // The gather model's bytes for each modelled cache (the first one gives the two fields after).
    struct Gather {
        std::int64_t cache_bytes = 0;
        std::int64_t min_bytes = 0;  // A, Y and the X rows Belady's MIN misses: the limit
        std::int64_t lru_bytes = 0;  // the same with an LRU cache's misses
    };
    std::vector<Gather> gather;
    double gather_floor_ms = 0;  // gather[0].min_bytes / copy bandwidth
    double gather_fraction = 0;  // gather_floor_ms / median ms
    std::optional<double> speedup;
    CheckResult check;
};

// The matrix read once and Y written once in fp32.
std::int64_t matrix_and_y_bytes(const halo::Csr& a, std::int64_t dim)
{
    const std::int64_t matrix = (a.num_rows + 1) * std::int64_t{sizeof(halo::offset_t)} +
                                a.nnz() * std::int64_t{sizeof(halo::local_id)} +
                                (a.has_values() ? a.nnz() * std::int64_t{sizeof(float)} : 0);
    return matrix + a.num_rows * dim * std::int64_t{sizeof(float)};
}

std::int64_t x_row_bytes(std::int64_t dim, halo::FeatureType x_type)
{
    return dim * static_cast<std::int64_t>(halo::feature_bytes(x_type));
}

// X read once in its element type, Y written once in fp32, the matrix read once.
std::int64_t compulsory_bytes(const halo::Csr& a, std::int64_t dim,
                              halo::FeatureType x_type = halo::FeatureType::fp32)
{
    return matrix_and_y_bytes(a, dim) + a.num_cols * x_row_bytes(dim, x_type);
}

// ---------------------------------------------------------------------------------------------
// The gather-bound limit (include/halo/gather_model.hpp, bench/README.md): the X-row misses of
// A's gathers in CSR order through each modelled cache, for every X row width the run times.

class GatherModel {
public:
    GatherModel(const halo::Csr& a, const std::vector<double>& cache_mib,
                std::int64_t l2_cache_bytes, const std::vector<std::int64_t>& dims,
                const std::vector<halo::FeatureType>& types)
    {
        if (cache_mib.size() == 1 && cache_mib.front() == 0) {
            fmt::print("gather model: off (--gather-cache-mib 0)\n");
            return;
        }
        if (cache_mib.empty()) {
            caches_.push_back(l2_cache_bytes);
        }
        for (const auto mib : cache_mib) {
            if (!(mib > 0) || mib > 1 << 20) {
                HALO_THROW(halo::InputError, "--gather-cache-mib: ", mib,
                           " MiB is not a cache size in (0, 1048576]");
            }
            caches_.push_back(static_cast<std::int64_t>(mib * double(1 << 20)));
        }
        for (const auto dim : dims) {
            for (const auto type : types) {
                const auto row = x_row_bytes(dim, type);
                if (std::find(row_bytes_.begin(), row_bytes_.end(), row) == row_bytes_.end()) {
                    row_bytes_.push_back(row);
                }
            }
        }
        std::vector<std::int64_t> capacities;
        for (const auto row : row_bytes_) {
            for (const auto cache : caches_) {
                capacities.push_back(halo::cache_capacity_rows(cache, row));
            }
        }
        halo::app::Stopwatch time;
        traffic_ = halo::gather_traffic(a.view(), capacities);
        fmt::print(
            "gather model: {} distinct X rows read by {} nonzeros in CSR order, {} cache(s) x {} "
            "row width(s) in {:.1f} s\n",
            traffic_.empty() ? 0 : traffic_.front().distinct, a.nnz(), caches_.size(),
            row_bytes_.size(), time.seconds());
        for (std::size_t r = 0; r < row_bytes_.size(); ++r) {
            for (std::size_t c = 0; c < caches_.size(); ++c) {
                const auto& t = traffic_[r * caches_.size() + c];
                fmt::print(
                    "  rows of {} B, cache {} ({} rows): misses MIN {} ({:.2f} per row read), "
                    "LRU {} ({:.2f})\n",
                    row_bytes_[r], halo::app::format_bytes(double(caches_[c])), t.capacity_rows,
                    t.min_misses,
                    double(t.min_misses) / double(std::max<std::int64_t>(1, t.distinct)),
                    t.lru_misses,
                    double(t.lru_misses) / double(std::max<std::int64_t>(1, t.distinct)));
            }
        }
    }

    // The record's gather bytes for each cache (none when the model is off).
    std::vector<Record::Gather> bytes(const halo::Csr& a, std::int64_t dim,
                                      halo::FeatureType type) const
    {
        std::vector<Record::Gather> out;
        const auto row = x_row_bytes(dim, type);
        const auto r = std::find(row_bytes_.begin(), row_bytes_.end(), row);
        if (r == row_bytes_.end()) {
            return out;
        }
        const auto base = matrix_and_y_bytes(a, dim);
        for (std::size_t c = 0; c < caches_.size(); ++c) {
            const auto& t = traffic_[(r - row_bytes_.begin()) * caches_.size() + c];
            out.push_back({caches_[c], base + t.min_misses * row, base + t.lru_misses * row});
        }
        return out;
    }

private:
    std::vector<std::int64_t> caches_;
    std::vector<std::int64_t> row_bytes_;
    std::vector<halo::GatherTraffic> traffic_;  // row width major, cache minor
};

struct Kernel {
    const KernelEntry* entry = nullptr;
    std::unique_ptr<halo::SpmmPlan> plan;
    double setup_ms = 0;
    std::string error;
    // The plan refused this operator (halo::InputError: a kernel whose limits it exceeds, such as
    // the resident-slice kernel's column count): its records are SKIPPED, not failures.
    bool refused = false;
    // What this kernel reads X as: the run's --feature-type, fp32 for the baseline.
    halo::FeatureType x_type = halo::FeatureType::fp32;
};

// The X and Y buffer sets of one width, each kind in one allocation (a small graph may need
// thousands of sets); set s starts at a 256-byte aligned offset.
struct BufferSets {
    std::int64_t count = 0;
    std::size_t x_stride = 0;  // floats from one set's X to the next
    std::size_t y_stride = 0;
    bench::DeviceArray x;
    bench::DeviceArray y;
    // --feature-type fp16/bf16: each set's X converted once on the device, 2-byte elements
    // (held in a float array of half the count), h_stride elements from one set to the next.
    halo::FeatureType lowp_type = halo::FeatureType::fp32;
    std::size_t h_stride = 0;
    bench::DeviceArray h;

    float* x_set(std::int64_t s) const { return x.data() + s * x_stride; }
    float* y_set(std::int64_t s) const { return y.data() + s * y_stride; }
    void* h_set(std::int64_t s) const
    {
        return reinterpret_cast<std::uint16_t*>(h.data()) + s * h_stride;
    }
};

// Checks, warms up, times and checks again one kernel at one width on the prepared buffer sets.
// refs: the references of the first and last set for the kernel's X type.
void measure(Kernel& kernel, Record& rec, const Options& o, const halo::Csr& a, const CheckSet& cs,
             const BufferSets& sets, const std::vector<Reference>& refs, double copy_gb_per_s,
             const GatherModel& gather, cudaStream_t stream)
{
    const auto dim = rec.dim;
    const auto last = sets.count - 1;
    auto& plan = *kernel.plan;
    halo::cuda::FeatureSpmmPlan* lowp = nullptr;
    if (kernel.x_type != halo::FeatureType::fp32) {
        lowp = halo::cuda::as_feature_plan(plan);
        HALO_EXPECTS(lowp != nullptr, "the plan reads fp32 features only");
    }
    auto launch = [&](std::int64_t set) {
        const halo::DenseView<float> y{sets.y_set(set), a.num_rows, dim, dim};
        if (lowp != nullptr) {
            lowp->run_features({sets.h_set(set), kernel.x_type, a.num_cols, dim, dim}, y,
                               {0, a.num_rows});
        } else {
            plan.run({sets.x_set(set), a.num_cols, dim, dim}, y, {0, a.num_rows});
        }
        bench::check_last_error();
    };
    rec.check = checked_run([&] { launch(0); }, cs, refs.front(), sets.y_set(0), a, dim, stream);

    for (int w = 0; w < o.run.warmup; ++w) {
        launch(w % sets.count);
    }
    bench::EventTimer timer(stream, o.run.runs);
    for (int r = 0; r < o.run.runs; ++r) {
        const auto set = (o.run.warmup + r) % sets.count;
        timer.start(r);
        launch(set);
        timer.stop(r);
    }
    rec.ms = summarize(timer.elapsed_ms());

    // Again on another buffer set, after every timed run: a plan that kept the first set's
    // pointers, or state that drifts between runs, shows up here.
    if (last > 0) {
        rec.check.merge(
            checked_run([&] { launch(last); }, cs, refs.back(), sets.y_set(last), a, dim, stream));
    }

    rec.compulsory_bytes = compulsory_bytes(a, dim, kernel.x_type);
    const auto bytes = static_cast<double>(rec.compulsory_bytes);
    rec.gflops = 2.0 * static_cast<double>(a.nnz()) * dim / (rec.ms.median * 1e6);
    rec.gb_per_s = bytes / (rec.ms.median * 1e6);
    rec.floor_ms = bytes / (copy_gb_per_s * 1e6);
    rec.roofline_fraction = rec.gb_per_s / copy_gb_per_s;
    rec.gather = gather.bytes(a, dim, kernel.x_type);
    if (!rec.gather.empty()) {
        rec.gather_floor_ms =
            static_cast<double>(rec.gather.front().min_bytes) / (copy_gb_per_s * 1e6);
        rec.gather_fraction = rec.gather_floor_ms / rec.ms.median;
    }
    rec.status = rec.check.bad > 0 ? "FAILED" : "ok";
}

// ---------------------------------------------------------------------------------------------
// Output.

std::string format_speedup(const Record& r)
{
    return r.speedup ? fmt::format("{:.2f}x", *r.speedup) : "-";
}

std::string format_gather(const Record& r)
{
    return r.gather.empty() ? "-" : fmt::format("{:.1f}%", 100.0 * r.gather_fraction);
}

void print_table(const std::vector<Record>& records)
{
    fmt::print(
        "\n{:<20} {:>4} {:>5} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>6} {:>7} {:>8} "
        "{:>9} {:>8} {}\n",
        "kernel", "x", "d", "sets", "median ms", "min ms", "max ms", "floor ms", "GFLOP/s", "GB/s",
        "%copy", "%gather", "speedup", "max rel", "bad", "status");
    bool lowp = false;
    for (const auto& r : records) {
        lowp = lowp || r.feature_type != "fp32";
        if (r.status == "ERROR" || r.status == "SKIPPED") {
            fmt::print(
                "{:<20} {:>4} {:>5} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>6} {:>7} "
                "{:>8} "
                "{:>9} {:>8} {}: {}\n",
                r.kernel, r.feature_type, r.dim, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                "-", "-", r.status, r.message);
            continue;
        }
        fmt::print(
            "{:<20} {:>4} {:>5} {:>5} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>9.1f} {:>8.1f} "
            "{:>5.1f}% {:>7} {:>8} {:>9.2e} {:>8} {}\n",
            r.kernel, r.feature_type, r.dim, r.sets, r.ms.median, r.ms.min, r.ms.max, r.floor_ms,
            r.gflops, r.gb_per_s, 100.0 * r.roofline_fraction, format_gather(r), format_speedup(r),
            r.check.max_rel_error, r.check.bad, r.status);
    }
    fmt::print(
        "x: the element type each kernel reads X as{}; floor: compulsory bytes (X in that type) "
        "/ copy bandwidth;\n%copy: achieved GB/s over the copy's; %gather: the gather-bound "
        "limit (A, Y and the X rows Belady's MIN misses in the first modelled cache, over the "
        "copy bandwidth) / median;\n"
        "speedup: {} median / this median (same run);\nmax rel: max |y - ref| / "
        "sum_k |a_ik x_kj| (ref on X rounded to the kernel's type); bad: elements outside the "
        "tolerance or not finite (bench/README.md)\n",
        lowp ? fmt::format(" (the {} baseline reads fp32 always)", kBaseline) : std::string(),
        kBaseline);
}

Json record_json(const Record& r)
{
    Json j;
    j["kernel"] = r.kernel;
    if (!r.algorithm.empty()) {
        j["algorithm"] = r.algorithm;
    }
    j["feature_type"] = r.feature_type;
    j["dim"] = r.dim;
    j["status"] = r.status;
    if (!r.message.empty()) {
        j["message"] = r.message;
    }
    if (r.status == "ERROR" || r.status == "SKIPPED") {
        return j;
    }
    j["buffer_sets"] = r.sets;
    j["set_bytes"] = r.set_bytes;
    j["setup_ms"] = r.setup_ms;
    j["time_ms"] = stats_json(r.ms);
    j["gflop_per_s"] = r.gflops;
    j["compulsory_bytes"] = r.compulsory_bytes;
    j["gb_per_s"] = r.gb_per_s;
    j["floor_ms"] = r.floor_ms;
    j["roofline_fraction"] = r.roofline_fraction;
    if (!r.gather.empty()) {
        Json caches = Json::array();
        for (const auto& g : r.gather) {
            caches.push_back({{"cache_bytes", g.cache_bytes},
                              {"min_bytes", g.min_bytes},
                              {"lru_bytes", g.lru_bytes}});
        }
        j["gather_model"] = std::move(caches);
        j["gather_floor_ms"] = r.gather_floor_ms;
        j["gather_fraction"] = r.gather_fraction;
    }
    j["speedup_vs_baseline"] = r.speedup ? Json(*r.speedup) : Json(nullptr);
    j["check"] = {{"runs", r.check.runs},
                  {"rows", r.check.rows},
                  {"elements", r.check.elements},
                  {"bad_elements", r.check.bad},
                  {"nonfinite_elements", r.check.nonfinite},
                  {"max_rel_error", r.check.max_rel_error},
                  {"max_tolerance_used", r.check.max_tolerance_used},
                  {"rel_l2_error", r.check.rel_l2_error()}};
    return j;
}

// ---------------------------------------------------------------------------------------------

// The merge-path cost sweep: one "mergepath(cost=N)" kernel per cost, appended to `extra` (which
// must keep its elements in place: the chosen list points into it).
void add_mergepath_costs(const std::vector<std::int64_t>& costs, std::deque<KernelEntry>& extra,
                         std::vector<const KernelEntry*>& chosen)
{
    for (const auto cost : costs) {
        if (cost < 1) {
            HALO_THROW(halo::InputError, "--mergepath-costs: cost ", cost, " must be at least 1");
        }
        const auto name = fmt::format("mergepath(cost={})", cost);
        for (const auto* c : chosen) {
            if (c->name == name) {
                HALO_THROW(halo::InputError, "--mergepath-costs: cost ", cost, " given twice");
            }
        }
        extra.push_back(
            {name, fmt::format("MergePath-SpMM, {} merge items per segment at every width", cost),
             [cost](Context& ctx, const halo::Csr& a, std::int64_t max_dim, bool) {
                 halo::cuda::MergePathOptions mo;
                 mo.cost = cost;
                 return halo::cuda::make_mergepath_spmm_plan(ctx, a, max_dim, mo);
             }});
        chosen.push_back(&extra.back());
    }
}

// The unit-length sweep of the chunked row-split: one "rowchunk(length=N)" kernel per length,
// appended like add_mergepath_costs's.
void add_rowchunk_lengths(const std::vector<std::int64_t>& lengths, std::deque<KernelEntry>& extra,
                          std::vector<const KernelEntry*>& chosen)
{
    for (const auto length : lengths) {
        if (length < 1) {
            HALO_THROW(halo::InputError, "--rowchunk-lengths: length ", length,
                       " must be at least 1");
        }
        const auto name = fmt::format("rowchunk(length={})", length);
        for (const auto* c : chosen) {
            if (c->name == name) {
                HALO_THROW(halo::InputError, "--rowchunk-lengths: length ", length, " given twice");
            }
        }
        extra.push_back(
            {name, fmt::format("chunked row-split, rows longer than {} nonzeros cut", length),
             [length](Context& ctx, const halo::Csr& a, std::int64_t max_dim, bool) {
                 return halo::cuda::make_rowchunk_spmm_plan(ctx, a, max_dim, {.length = length});
             }});
        chosen.push_back(&extra.back());
    }
}

std::vector<const KernelEntry*> resolve_kernels(const std::vector<std::string>& names)
{
    std::vector<const KernelEntry*> chosen;
    auto find = [](const std::string& name) -> const KernelEntry* {
        for (const auto& entry : bench_kernels()) {
            if (entry.name == name) {
                return &entry;
            }
        }
        return nullptr;
    };
    const auto* baseline = find(kBaseline);
    HALO_EXPECTS(baseline != nullptr, "the baseline ", kBaseline, " is registered");
    chosen.push_back(baseline);
    bool baseline_asked = false;
    for (const auto& name : names) {
        const auto* entry = find(name);
        if (entry == nullptr) {
            HALO_THROW(halo::InputError, "--kernels: unknown kernel '", name,
                       "' (known: ", halo::spmm_kernel_names(halo::spmm_use_bench), ")");
        }
        if (entry == baseline) {
            baseline_asked = true;
        } else if (std::find(chosen.begin(), chosen.end(), entry) == chosen.end()) {
            chosen.push_back(entry);
        }
    }
    if (!baseline_asked) {
        fmt::print("{} runs as the baseline of every comparison\n", kBaseline);
    }
    return chosen;
}

void check_dims(const std::vector<std::int64_t>& dims)
{
    if (dims.empty()) {
        HALO_THROW(halo::InputError, "--dims: no width given");
    }
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] < 1 || dims[i] > (std::int64_t{1} << 16)) {
            HALO_THROW(halo::InputError, "--dims: width ", dims[i], " outside [1, 65536]");
        }
        if (std::find(dims.begin(), dims.begin() + i, dims[i]) != dims.begin() + i) {
            HALO_THROW(halo::InputError, "--dims: width ", dims[i], " given twice");
        }
    }
}

// The inputs of width d: distinct for each (seed, d), so no width reuses another's values.
std::uint64_t x_seed(std::uint64_t seed, std::int64_t dim)
{
    return seed * 0x100000001b3ULL + static_cast<std::uint64_t>(dim);
}

int run_spmm(const Options& o, const std::string& command)
{
    const auto date = utc_now_iso();
    check_dims(o.dims);
    auto kernel_entries = resolve_kernels(o.kernels);
    std::deque<KernelEntry> sweep_entries;
    add_mergepath_costs(o.mergepath_costs, sweep_entries, kernel_entries);
    add_rowchunk_lengths(o.rowchunk_lengths, sweep_entries, kernel_entries);
    const auto feature_type = halo::parse_feature_type(o.feature_type);

    if (o.e2e) {  // a job of its own, which opens the device only on the CUDA backend
        return run_e2e(o.run, o.e2e_model, o.graph, date, command);
    }
    check_before_device(o.run, o.graph);

    // 0. The device and its copy bandwidth (the roofline every kernel is held against), before a
    // possibly long graph build.
    BenchDevice device(o.run.device);
    auto& ctx = device.ctx;
    const auto stream = ctx.compute_stream();
    const auto& info = device.info;
    const double copy_gb_per_s = device.copy_gb_per_s();

    // 1. The graph.
    halo::app::Stopwatch load_time;
    const auto graph = load_graph(o.graph);
    const auto& a = graph.csr;
    const auto max_degree = halo::max_row_nnz(a.view());
    const double avg_degree = static_cast<double>(a.nnz()) / static_cast<double>(a.num_rows);
    fmt::print(
        "graph {}: {} rows, {} columns, {} nonzeros ({}), degree avg {:.2f} max {} "
        "({:.1f} s)\n",
        graph.source, a.num_rows, a.num_cols, a.nnz(),
        a.has_values() ? "float32 values" : "pattern, all ones", avg_degree, max_degree,
        load_time.seconds());

    // 2. The gather model, for the X types the kernels read.
    std::vector<halo::FeatureType> x_types{halo::FeatureType::fp32};
    if (feature_type != halo::FeatureType::fp32) {
        x_types.push_back(feature_type);
    }
    const GatherModel gather(a, o.gather_cache_mib, info.l2_cache_bytes, o.dims, x_types);
    std::fflush(stdout);

    // 3. Plans: each kernel's preprocessing, once, for the widest d.
    const auto max_dim = *std::max_element(o.dims.begin(), o.dims.end());
    std::vector<Kernel> kernels;
    for (const auto* entry : kernel_entries) {
        Kernel k;
        k.entry = entry;
        k.x_type = entry->name == kBaseline ? halo::FeatureType::fp32 : feature_type;
        halo::app::Stopwatch setup;
        try {
            k.plan = entry->make(ctx, a, max_dim, o.l2_hints);
            ctx.synchronize();
            k.setup_ms = setup.seconds() * 1e3;
            fmt::print("plan {} ({}): {} ready in {:.1f} ms\n", entry->name, entry->description,
                       k.plan->algorithm(), k.setup_ms);
        } catch (const halo::Error& e) {
            if (entry->name == kBaseline) {
                throw;  // no baseline, no benchmark
            }
            k.plan.reset();
            k.error = e.message();
            k.refused = dynamic_cast<const halo::InputError*>(&e) != nullptr;
            fmt::print("plan {}: {}: {}\n", entry->name, k.refused ? "REFUSED" : "ERROR", k.error);
        }
        kernels.push_back(std::move(k));
    }

    // 4. The rows every check compares.
    const auto cs = make_check_set(a, o.run.check_rows, o.run.seed);
    if (cs.sampled) {
        fmt::print(
            "checking {} of {} rows: a seeded sample of {} plus the first, the last and "
            "the longest row\n",
            cs.rows.size(), a.num_rows, o.run.check_rows);
    } else {
        fmt::print("checking all {} rows\n", a.num_rows);
    }
    std::fflush(stdout);

    // 5. Every width, every kernel.
    std::vector<Record> records;
    for (const auto dim : o.dims) {
        const auto set_bytes = (a.num_cols + a.num_rows) * dim * std::int64_t{sizeof(float)};
        const bool lowp = feature_type != halo::FeatureType::fp32;
        // Enough sets that what the smallest reader reads (X in its type and Y) exceeds twice L2.
        const auto read_bytes =
            a.num_cols * dim * static_cast<std::int64_t>(halo::feature_bytes(feature_type)) +
            a.num_rows * dim * std::int64_t{sizeof(float)};
        const auto wanted = wanted_sets(static_cast<double>(read_bytes), info.l2_cache_bytes);
        BufferSets buffers;
        buffers.x_stride = aligned_floats(a.num_cols * dim);
        buffers.y_stride = aligned_floats(a.num_rows * dim);
        if (lowp) {
            buffers.lowp_type = feature_type;
            buffers.h_stride = 2 * aligned_floats((a.num_cols * dim + 1) / 2);
        }
        const auto stride_bytes =
            (buffers.x_stride + buffers.y_stride + buffers.h_stride / 2) * sizeof(float);
        const auto free = bench::free_device_memory();
        const std::size_t fit = free > kReserveBytes ? (free - kReserveBytes) / stride_bytes : 0;
        const auto sets =
            static_cast<std::int64_t>(std::min(static_cast<std::size_t>(wanted), fit));
        if (sets == 0) {
            const auto why = fmt::format(
                "one X/Y set needs {}, {} of device memory free and {} of it kept in reserve",
                halo::app::format_bytes(static_cast<double>(set_bytes)),
                halo::app::format_bytes(static_cast<double>(free)),
                halo::app::format_bytes(static_cast<double>(kReserveBytes)));
            fmt::print("d = {}: SKIPPED: {}\n", dim, why);
            for (const auto& k : kernels) {
                Record rec;
                rec.kernel = k.entry->name;
                rec.dim = dim;
                rec.status = "SKIPPED";
                rec.message = why;
                records.push_back(std::move(rec));
            }
            continue;
        }
        fmt::print("d = {}: {} buffer set(s) of {:.1f} MiB (X and Y){}\n", dim, sets,
                   set_bytes / double(1 << 20),
                   sets < wanted ? fmt::format(", fewer than the {} that exceed twice L2: "
                                               "timings may include L2 reuse",
                                               wanted)
                                 : "");
        std::fflush(stdout);

        buffers.count = sets;
        buffers.x = bench::DeviceArray(buffers.x_stride * sets);
        buffers.y = bench::DeviceArray(buffers.y_stride * sets);
        // One seeded stream of values over all sets: every set holds different inputs.
        bench::fill_uniform(buffers.x.data(), buffers.x.size(), x_seed(o.run.seed, dim), -1.0f,
                            1.0f, stream);
        bench::fill_value(buffers.y.data(), buffers.y.size(),
                          std::numeric_limits<float>::quiet_NaN(), stream);
        if (lowp) {
            // X converted once per set on the device; the timed runs read only the converted X.
            buffers.h = bench::DeviceArray(buffers.h_stride / 2 * sets);
            for (std::int64_t set = 0; set < sets; ++set) {
                halo::cuda::convert_features(stream, {buffers.x_set(set), a.num_cols, dim, dim},
                                             feature_type, buffers.h_set(set), dim);
            }
        }
        bench::synchronize(stream);
        // The references of the first and the last set (the two that checks use), computed
        // before any kernel runs and shared by all of them: on fp32 X for the baseline, on X
        // rounded to --feature-type for the others.
        std::vector<Reference> refs;
        std::vector<Reference> lowp_refs;
        std::vector<std::int64_t> checked_sets{0};
        if (sets > 1) {
            checked_sets.push_back(sets - 1);
        }
        for (const auto set : checked_sets) {
            refs.push_back(make_reference(cs, buffers.x_set(set), a.num_cols, dim, stream));
            if (lowp) {
                lowp_refs.push_back(
                    make_reference(cs, buffers.x_set(set), a.num_cols, dim, stream, feature_type));
            }
        }

        const auto first = records.size();
        for (auto& k : kernels) {
            Record rec;
            rec.kernel = k.entry->name;
            rec.feature_type = halo::to_string(k.x_type);
            rec.dim = dim;
            rec.sets = sets;
            rec.set_bytes = set_bytes;
            rec.setup_ms = k.setup_ms;
            if (!k.plan) {
                rec.status = k.refused ? "SKIPPED" : "ERROR";
                rec.message = k.refused ? "plan refused the operator: " + k.error : k.error;
            } else if (k.x_type != halo::FeatureType::fp32 &&
                       halo::cuda::as_feature_plan(*k.plan) == nullptr) {
                rec.status = "SKIPPED";
                rec.message = "reads fp32 features only";
            } else {
                try {
                    measure(k, rec, o, a, cs, buffers,
                            k.x_type == halo::FeatureType::fp32 ? refs : lowp_refs, copy_gb_per_s,
                            gather, stream);
                    // After the runs: a plan that decides per width (autotune, auto) names the
                    // kernel it ran at this width.
                    rec.algorithm = k.plan->algorithm();
                } catch (const halo::Error& e) {
                    if (k.entry->name == kBaseline) {
                        throw;
                    }
                    rec.status = "ERROR";
                    rec.message = e.message();
                }
            }
            if (rec.status == "ERROR" || rec.status == "SKIPPED") {
                fmt::print("  {:<20} {}: {}\n", rec.kernel, rec.status, rec.message);
            } else {
                fmt::print(
                    "  {:<20} {} median {:.4f} ms, {:.1f} GFLOP/s, {:.1f} GB/s ({:.1f}% of "
                    "copy, {} of the gather-bound limit), {} bad of {} checked elements: {}\n",
                    rec.kernel, rec.feature_type, rec.ms.median, rec.gflops, rec.gb_per_s,
                    100.0 * rec.roofline_fraction, format_gather(rec), rec.check.bad,
                    rec.check.elements, rec.status);
            }
            std::fflush(stdout);
            records.push_back(std::move(rec));
        }
        const auto& base = records[first];  // the baseline runs first
        for (auto i = first; i < records.size(); ++i) {
            auto& r = records[i];
            if (r.status != "ERROR" && r.status != "SKIPPED" && base.status != "ERROR") {
                r.speedup = base.ms.median / r.ms.median;
            }
        }
    }

    // 6. The table and the JSON file.
    print_table(records);
    int failures = 0;
    for (const auto& r : records) {
        if (r.status == "FAILED" || r.status == "ERROR") {
            ++failures;
        }
    }
    fmt::print("\n{}: {} of {} measurements failed\n", failures ? "FAILED" : "ok", failures,
               records.size());

    if (!o.run.json.empty()) {
        Json doc = provenance_json("halo-bench", date, command);
        doc["device"] = device.device_json();
        doc["graph"] = graph_json(graph, o.graph);
        doc["copy_bandwidth"] = device.copy_json();
        doc["settings"] = {{"warmup", o.run.warmup},
                           {"runs", o.run.runs},
                           {"seed", o.run.seed},
                           {"baseline", kBaseline},
                           {"feature_type", halo::to_string(feature_type)},
                           {"baseline_feature_type", "fp32"},
                           {"mergepath_costs", o.mergepath_costs},
                           {"rowchunk_lengths", o.rowchunk_lengths},
                           {"check_rows", cs.rows.size()},
                           {"check_sampled", cs.sampled}};
        Json list = Json::array();
        for (const auto& r : records) {
            list.push_back(record_json(r));
        }
        doc["records"] = std::move(list);
        write_json(o.run.json, doc);
    }
    return failures ? 3 : 0;
}

}  // namespace

void add_spmm_mode(CLI::App& app, const std::string& command, std::function<int()>& run)
{
    auto o = std::make_shared<Options>();
    // A subcommand brings its own options, so --graph is required only when no subcommand is
    // given (checked by `run`).
    add_graph_options(app, o->graph, false);
    app.add_option("--dims", o->dims, "dense widths d, comma-separated")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--kernels", o->kernels,
                   "kernels to time, comma-separated (known: " +
                       halo::spmm_kernel_names(halo::spmm_use_bench) + "); " + kBaseline +
                       " always runs as the baseline")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--feature-type", o->feature_type,
                   "element type of X for every kernel but the baseline (fp32 | fp16 | bf16; "
                   "converted once on the device, fp32 accumulation and output; " +
                       std::string(kBaseline) + " reads fp32 always)")
        ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
        ->capture_default_str();
    app.add_option("--mergepath-costs", o->mergepath_costs,
                   "merge-path cost sweep: adds a kernel mergepath(cost=N) per cost, "
                   "comma-separated")
        ->delimiter(',');
    app.add_option("--rowchunk-lengths", o->rowchunk_lengths,
                   "chunked row-split unit-length sweep: adds a kernel rowchunk(length=N) per "
                   "length, comma-separated")
        ->delimiter(',');
    app.add_option("--gather-cache-mib", o->gather_cache_mib,
                   "caches of the gather model in MiB, comma-separated (default: the device's L2; "
                   "0: no model); the first gives the %gather column (bench/README.md)")
        ->delimiter(',');
    app.add_flag("--l2-hints", o->l2_hints,
                 "auto, autotune and the MergePath kernels load X with L2 hints where X is past "
                 "32x the L2 (as halo-infer --l2-hints)");
    app.add_option("--warmup", o->run.warmup, "untimed launches per kernel and width")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    app.add_option("--runs", o->run.runs, "timed launches per kernel and width (median reported)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    app.add_option("--check-rows", o->run.check_rows,
                   "rows checked on graphs of more than 200000 rows (a seeded sample; 0: all)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
        ->capture_default_str();
    app.add_option("--seed", o->run.seed, "seed of the dense inputs and the checked-row sample")
        ->capture_default_str();
    app.add_option("--device", o->run.device, "CUDA device index")->capture_default_str();
    app.add_option("--json", o->run.json, "also write the results as JSON to this file");
    app.add_flag("--e2e", o->e2e,
                 "time a whole inference instead (halo-infer's job on one rank, one part): per "
                 "layer wall, SpMM, dense, exchange and waiting time");
    app.add_option("--backend", o->e2e_model.backend, "with --e2e: cuda | cpu")
        ->check(CLI::IsMember({"cuda", "cpu"}))
        ->capture_default_str();
    app.add_option("--model-dims", o->e2e_model.model_dims,
                   "with --e2e: widths of the random model")
        ->capture_default_str();
    app.add_option("--layer", o->e2e_model.layer, "with --e2e: gcn | sage | gin")
        ->check(CLI::IsMember({"gcn", "sage", "gin"}))
        ->capture_default_str();
    app.add_flag("--step-timing", o->e2e_model.step_timing,
                 "with --e2e: synchronize after every step, so that each layer's SpMM and dense "
                 "times are measured (as halo-infer --step-timing; no CUDA graph then)");
    app.add_flag("--no-cuda-graph", o->e2e_model.no_cuda_graph,
                 "with --e2e: never replay the forward pass as a CUDA graph (as halo-infer "
                 "--no-cuda-graph: per-layer times measured, SpMM and dense not split)");
    run = [o, &command] {
        if (o->graph.graph.empty()) {
            fmt::print(stderr, "halo-bench: --graph is required (or name a mode; see --help)\n");
            return 2;
        }
        return app::run_guarded("halo-bench", [&] { return run_spmm(*o, command); });
    };
}

}  // namespace halo::bench_app
