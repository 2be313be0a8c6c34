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
    rec.roofline_fraction = roofline_fraction(bytes, rec.ms.median, copy_gb_per_s);
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

MeasuredRow measured_row(const Record& r)
{
    MeasuredRow row;
    row.name = r.kernel;
    if (!r.algorithm.empty()) {
        row.params["algorithm"] = r.algorithm;
    }
    row.params["feature_type"] = r.feature_type;
    row.params["dim"] = r.dim;
    row.status = r.status;
    row.message = r.message;
    if (!row.timed()) {
        return row;
    }
    row.time = {r.ms, r.sets};
    row.compulsory_bytes = r.compulsory_bytes;
    row.roofline_fraction = r.roofline_fraction;
    row.measured = {{"set_bytes", r.set_bytes},
                    {"setup_ms", r.setup_ms},
                    {"gflop_per_s", r.gflops},
                    {"gb_per_s", r.gb_per_s},
                    {"floor_ms", r.floor_ms}};
    if (!r.gather.empty()) {
        Json caches = Json::array();
        for (const auto& g : r.gather) {
            caches.push_back({{"cache_bytes", g.cache_bytes},
                              {"min_bytes", g.min_bytes},
                              {"lru_bytes", g.lru_bytes}});
        }
        row.measured["gather_model"] = std::move(caches);
        row.measured["gather_floor_ms"] = r.gather_floor_ms;
        row.measured["gather_fraction"] = r.gather_fraction;
    }
    row.ratios.push_back({"speedup_vs_baseline", fmt::format("vs {}", kBaseline), r.speedup});
    row.check = {"elements", r.check.elements, r.check.bad,
                 Json{{"runs", r.check.runs},
                      {"rows", r.check.rows},
                      {"nonfinite_elements", r.check.nonfinite},
                      {"max_rel_error", r.check.max_rel_error},
                      {"max_tolerance_used", r.check.max_tolerance_used},
                      {"rel_l2_error", r.check.rel_l2_error()}}};
    row.cells = {{"floor ms", fmt::format("{:.4f}", r.floor_ms)},
                 {"GFLOP/s", fmt::format("{:.1f}", r.gflops)},
                 {"GB/s", fmt::format("{:.1f}", r.gb_per_s)},
                 {"%gather", format_gather(r)},
                 {"max rel", fmt::format("{:.2e}", r.check.max_rel_error)}};
    return row;
}

void print_table(const std::vector<Record>& records)
{
    std::vector<MeasuredRow> rows;
    bool lowp = false;
    for (const auto& r : records) {
        lowp = lowp || r.feature_type != "fp32";
        rows.push_back(measured_row(r));
    }
    print_table(
        rows,
        fmt::format(
            "feature_type: the element type each kernel reads X as{}; floor: compulsory bytes "
            "(X in that type) / copy bandwidth; %gather: the gather-bound limit (A, Y and the X "
            "rows Belady's MIN misses in the first modelled cache, over the copy bandwidth) / "
            "median;\nmax rel: max |y - ref| / sum_k |a_ik x_kj| (ref on X rounded to the "
            "kernel's type); bad: elements outside the tolerance or not finite "
            "(bench/README.md)",
            lowp ? fmt::format(" (the {} baseline reads fp32 always)", kBaseline) : std::string()));
}

}  // namespace halo::bench_app::spmm
