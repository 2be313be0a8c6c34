// halo-bench's SpMM measurement (bench_spmm.hpp): the compulsory and gather-bound bytes, one
// kernel checked and timed at one width, and the records' table and JSON.
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "app_common.hpp"
#include "bench_spmm.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"

namespace halo::bench_app::spmm {

namespace {

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

std::string format_speedup(const Record& r)
{
    return r.speedup ? fmt::format("{:.2f}x", *r.speedup) : "-";
}

}  // namespace

std::int64_t compulsory_bytes(const halo::Csr& a, std::int64_t dim, halo::FeatureType x_type)
{
    return matrix_and_y_bytes(a, dim) + a.num_cols * x_row_bytes(dim, x_type);
}

GatherModel::GatherModel(const halo::Csr& a, const std::vector<double>& cache_mib,
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

std::vector<Record::Gather> GatherModel::bytes(const halo::Csr& a, std::int64_t dim,
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

void measure(Kernel& kernel, Record& rec, const KernelRunOptions& run, const halo::Csr& a,
             const CheckSet& cs, const BufferSets& sets, const std::vector<Reference>& refs,
             double copy_gb_per_s, const GatherModel& gather, cudaStream_t stream)
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

    for (int w = 0; w < run.warmup; ++w) {
        launch(w % sets.count);
    }
    bench::EventTimer timer(stream, run.runs);
    for (int r = 0; r < run.runs; ++r) {
        const auto set = (run.warmup + r) % sets.count;
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

}  // namespace halo::bench_app::spmm
