// halo-bench load: how long one part's input features take from the dataset file to the device,
// float32 against int8 features (the int8 total should be at most 40% of float32's).
//
// Given two datasets of the same partitioned graph (halo-partition without and with --quantize
// int8, same seed and parts), each run of each dataset times
//   (1) read:  read_stored_features (open, root checks, the part's feature arrays) on the host
//              clock; int8 reads values + scale + zero point and does not dequantize;
//   (2) h2d:   cudaMemcpyAsync of those arrays from the (pageable) host vectors to the device,
//              timed with CUDA events;
//   (3) dequant (int8 only): the int8 array dequantized to fp32 on the device, event-timed.
// Two int8 totals are reported: "int8 on device" (1 + 2: kernels that read int8, docs/AES.md) and
// "int8 dequantized to fp32 on device" (1 + 2 + 3). Before timing, the device results are copied
// back and checked: float32 bit for bit against the file, int8 dequantized bit for bit against
// halo::dequantize, and the int8 values within scale / 2 of the float32 dataset's (so the two files
// really hold the same features in the same row order). Exit code 3 when a check fails.
//
// The page cache: after the first read the file comes from memory, so (1) measures HDF5 and memcpy
// speed, not the disk. --cold calls posix_fadvise(POSIX_FADV_DONTNEED) on the file before every
// read, which asks the kernel to drop the file's clean cached pages (any user who can open the
// file may ask; pages that are dirty or mapped elsewhere stay), and reports with mincore how much
// of the file was still resident after the request.
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "app_common.hpp"
#include "bench_common.hpp"
#include "bench_report.hpp"
#include "bench_util.hpp"
#include "halo/core/dense.hpp"
#include "halo/core/error.hpp"
#include "halo/core/io.hpp"
#include "halo/kernels/cuda/aes.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/quantize/quantize.hpp"
#include "halo/store/feature_reader.hpp"

namespace halo::bench_app {
namespace {

namespace bench = halo::cuda::bench;

struct LoadBenchOptions {
    std::string fp32;
    std::string int8;
    int part = 0;
    int warmup = 2;
    int runs = 10;
    bool cold = false;
    int device = 0;
    std::string json;
};

/// What --cold did to a file before one read.
struct DropResult {
    bool requested = false;  // posix_fadvise returned 0
    double resident_after = -1;  // share of the file's pages still cached after it (-1: unknown)
    std::string error;
};

/// Share of `path`'s pages in the page cache (mincore on a read-only mapping); -1 when unknown.
double resident_fraction(int fd, std::size_t size)
{
    if (size == 0) {
        return 0;
    }
    void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        return -1;
    }
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> vec((size + page - 1) / page);
    double out = -1;
    if (mincore(map, size, vec.data()) == 0) {
        const auto resident = std::count_if(vec.begin(), vec.end(), [](unsigned char v) {
            return (v & 1) != 0;
        });
        out = static_cast<double>(resident) / static_cast<double>(vec.size());
    }
    munmap(map, size);
    return out;
}

DropResult drop_cached_pages(const std::string& path)
{
    DropResult r;
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) {
        r.error = fmt::format("{}: open: {}", path, std::strerror(errno));
        return r;
    }
    struct stat st {};
    const auto size = fstat(fd, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
    const int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    r.requested = rc == 0;
    if (rc != 0) {
        r.error = fmt::format("{}: posix_fadvise(DONTNEED): {}", path, std::strerror(rc));
    }
    r.resident_after = resident_fraction(fd, size);
    close(fd);
    return r;
}

double host_ms_since(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

/// The device copies of one dataset's features.
struct DeviceFeatures {
    cuda::DeviceBuffer<float> fp32;         // float32 dataset: the features; int8: dequantized
    cuda::DeviceBuffer<std::int8_t> data;   // int8 only
    cuda::DeviceBuffer<float> scale;        // int8 only
    cuda::DeviceBuffer<std::int32_t> zero;  // int8 only
};

void copy_to_device(const StoredFeatures& f, DeviceFeatures& d, cudaStream_t stream)
{
    if (f.feature_type == "int8") {
        HALO_CUDA_TRY(cudaMemcpyAsync(d.data.data(), f.int8.data.data(), f.int8.data.size(),
                                      cudaMemcpyHostToDevice, stream));
        HALO_CUDA_TRY(cudaMemcpyAsync(d.scale.data(), f.int8.scale.data(),
                                      f.int8.scale.size() * sizeof(float),
                                      cudaMemcpyHostToDevice, stream));
        HALO_CUDA_TRY(cudaMemcpyAsync(d.zero.data(), f.int8.zero_point.data(),
                                      f.int8.zero_point.size() * sizeof(std::int32_t),
                                      cudaMemcpyHostToDevice, stream));
    } else {
        HALO_CUDA_TRY(cudaMemcpyAsync(d.fp32.data(), f.fp32.data(), f.fp32.size() * sizeof(float),
                                      cudaMemcpyHostToDevice, stream));
    }
}

QuantizedView device_view(const StoredFeatures& f, const DeviceFeatures& d)
{
    return {d.data.data(), f.rows, f.cols, f.cols, d.scale.data(), d.zero.data()};
}

struct Measured {
    std::string dataset;
    std::string type;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t bytes = 0;
    std::int64_t file_bytes = 0;
    std::vector<double> read_ms, h2d_ms, dequant_ms, total_device_ms, total_dequant_ms;
    std::vector<DropResult> drops;
};

// The statistics of the runs, and the runs themselves.
Json samples_json(const std::vector<double>& v)
{
    if (v.empty()) {
        return nullptr;
    }
    auto j = stats_json(summarize(v));
    j["runs_ms"] = v;
    return j;
}

Measured measure(const std::string& path, const LoadBenchOptions& o, cuda::Context& ctx,
                 int& failures)
{
    const cudaStream_t stream = ctx.compute_stream();
    Measured m;
    m.dataset = path;
    m.file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
    // The first read sizes the device buffers and is checked; it is not timed.
    const auto first = read_stored_features(path, o.part);
    if (first.feature_type != "float32" && first.feature_type != "int8") {
        HALO_THROW(InputError, path, " holds ", first.feature_type,
                   " features; halo-bench load times float32 and int8 datasets");
    }
    m.type = first.feature_type;
    m.rows = first.rows;
    m.cols = first.cols;
    m.bytes = first.bytes();
    const auto n = static_cast<std::size_t>(first.rows * first.cols);
    const bool int8 = first.feature_type == "int8";
    DeviceFeatures d;
    d.fp32 = cuda::DeviceBuffer<float>(ctx, n);
    if (int8) {
        d.data = cuda::DeviceBuffer<std::int8_t>(ctx, n);
        d.scale = cuda::DeviceBuffer<float>(ctx, static_cast<std::size_t>(first.cols));
        d.zero = cuda::DeviceBuffer<std::int32_t>(ctx, static_cast<std::size_t>(first.cols));
    }

    // Check: what arrives on the device (dequantized for int8) is what the host computes.
    std::vector<float> expected(n);
    if (int8) {
        dequantize(first.int8.view(), dense_view(expected.data(), first.rows, first.cols));
    } else {
        expected = first.fp32;
    }
    bench::fill_value(d.fp32.data(), n, NAN, stream);
    copy_to_device(first, d, stream);
    if (int8) {
        const auto q = device_view(first, d);
        cuda::dequantize(stream, q, dense_view(d.fp32.data(), q.rows, q.cols));
    }
    std::vector<float> got(n);
    HALO_CUDA_TRY(cudaMemcpyAsync(got.data(), d.fp32.data(), n * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream));
    bench::synchronize(stream);
    std::int64_t bad = 0;
    std::size_t first_bad = 0;
    for (std::size_t e = 0; e < n; ++e) {
        if (std::memcmp(&got[e], &expected[e], sizeof(float)) != 0) {
            first_bad = bad == 0 ? e : first_bad;
            ++bad;
        }
    }
    if (bad > 0) {
        const auto i = static_cast<std::int64_t>(first_bad) / first.cols;
        fmt::print("FAIL {}: {} of {} device elements differ from the host{}; first at row {} "
                   "column {}: expected {}, got {}\n",
                   path, bad, n, int8 ? " dequantization" : " features", i,
                   static_cast<std::int64_t>(first_bad) - i * first.cols, expected[first_bad],
                   got[first_bad]);
        ++failures;
    }

    bench::EventTimer h2d(stream, o.warmup + o.runs);
    bench::EventTimer deq(stream, o.warmup + o.runs);
    for (int r = 0; r < o.warmup + o.runs; ++r) {
        DropResult drop;
        if (o.cold) {
            drop = drop_cached_pages(path);
        }
        const auto start = std::chrono::steady_clock::now();
        const auto f = read_stored_features(path, o.part);
        const double read_ms = host_ms_since(start);
        h2d.start(r);
        copy_to_device(f, d, stream);
        h2d.stop(r);
        deq.start(r);
        if (int8) {
            const auto q = device_view(f, d);
            cuda::dequantize(stream, q, dense_view(d.fp32.data(), q.rows, q.cols));
        }
        deq.stop(r);
        // The host vectors of this run are freed at the end of the iteration, so the copies must
        // be complete; the events already measured them.
        bench::synchronize(stream);
        if (r >= o.warmup) {
            m.read_ms.push_back(read_ms);
            if (o.cold) {
                m.drops.push_back(drop);
            }
        }
    }
    const auto h2d_all = h2d.elapsed_ms();
    const auto deq_all = deq.elapsed_ms();
    for (int r = o.warmup; r < o.warmup + o.runs; ++r) {
        const auto k = static_cast<std::size_t>(r - o.warmup);
        m.h2d_ms.push_back(h2d_all[static_cast<std::size_t>(r)]);
        m.total_device_ms.push_back(m.read_ms[k] + m.h2d_ms.back());
        if (int8) {
            m.dequant_ms.push_back(deq_all[static_cast<std::size_t>(r)]);
            m.total_dequant_ms.push_back(m.total_device_ms.back() + m.dequant_ms.back());
        }
    }
    return m;
}

/// Every int8 value within scale / 2 (plus the rounding of the product) of the float32 value.
void check_same_features(const LoadBenchOptions& o, int& failures)
{
    const auto a = read_stored_features(o.fp32, o.part);
    const auto b = read_stored_features(o.int8, o.part);
    if (a.feature_type != "float32" || b.feature_type != "int8") {
        HALO_THROW(InputError, "--fp32 ", o.fp32, " holds ", a.feature_type,
                   " features and --int8 ", o.int8, " holds ", b.feature_type,
                   " (expected float32 and int8)");
    }
    if (a.rows != b.rows || a.cols != b.cols) {
        HALO_THROW(InputError, o.fp32, " part ", o.part, " has features [", a.rows, ", ", a.cols,
                   "], ", o.int8, " [", b.rows, ", ", b.cols,
                   "]: not the same graph partitioned the same way");
    }
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < a.rows && bad == 0; ++i) {
        for (std::int64_t j = 0; j < a.cols; ++j) {
            const auto p = b.int8.view().params(j);
            const auto k = static_cast<std::size_t>(i * a.cols + j);
            const float x = a.fp32[k];
            const float q = dequantize_int8(b.int8.data[k], p);
            const double bound = 0.5 * p.scale * (1 + 1e-5) + 1e-6 * std::fabs(x);
            if (!(std::fabs(static_cast<double>(q) - x) <= bound)) {
                fmt::print("FAIL: {} row {} column {}: float32 {} but int8 dequantizes to {} "
                           "(scale {}): the two datasets do not hold the same features in the "
                           "same order (same graph, seed and --parts?)\n",
                           o.fp32, i, j, x, q, p.scale);
                ++bad;
                break;
            }
        }
    }
    failures += bad > 0 ? 1 : 0;
}

/// Median share of the file still cached after the --cold requests, as text.
std::string resident_text(const std::vector<DropResult>& drops)
{
    std::vector<double> v;
    for (const auto& d : drops) {
        if (d.resident_after >= 0) {
            v.push_back(d.resident_after);
        }
    }
    return v.empty() ? std::string("unknown") : fmt::format("{:.0f}%", 100 * summarize(v).median);
}

int run_load(const LoadBenchOptions& o, const std::string& command)
{
    const auto date = utc_now_iso();
    BenchDevice device(o.device);
    fmt::print("device {}: {}\n", device.info.index, device.info.name);
    int failures = 0;
    check_same_features(o, failures);
    const auto fp = measure(o.fp32, o, device.ctx, failures);
    const auto q8 = measure(o.int8, o, device.ctx, failures);

    fmt::print("part {} of each dataset: {} rows x {} features; median of {} runs after {} "
               "warm-up\n",
               o.part, fp.rows, fp.cols, o.runs, o.warmup);
    if (o.cold) {
        fmt::print("--cold: posix_fadvise(DONTNEED) on the file before every read; share of the "
                   "file still cached after the request (median): fp32 {}, int8 {}\n",
                   resident_text(fp.drops), resident_text(q8.drops));
        for (const auto* m : {&fp, &q8}) {
            for (const auto& d : m->drops) {
                if (!d.error.empty()) {
                    fmt::print("warning: {}\n", d.error);
                    break;
                }
            }
        }
    } else {
        fmt::print("note: the file is read from the page cache after the first run (warm reads: "
                   "HDF5 and memory speed, not the disk); --cold asks the kernel to drop the "
                   "file's cached pages before every read\n");
    }
    const auto med = [](const std::vector<double>& v) { return summarize(v).median; };
    const double fp_total = med(fp.total_device_ms);
    const double dev_total = med(q8.total_device_ms);
    const double deq_total = med(q8.total_dequant_ms);
    fmt::print("{:<34} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8}\n", "", "bytes", "read ms",
               "h2d ms", "deq ms", "total ms", "vs fp32");
    fmt::print("{:<34} {:>12} {:>10.3f} {:>10.3f} {:>10} {:>10.3f} {:>7.1f}%\n", "fp32", fp.bytes,
               med(fp.read_ms), med(fp.h2d_ms), "-", fp_total, 100.0);
    fmt::print("{:<34} {:>12} {:>10.3f} {:>10.3f} {:>10} {:>10.3f} {:>7.1f}%\n", "int8 on device",
               q8.bytes, med(q8.read_ms), med(q8.h2d_ms), "-", dev_total,
               100 * dev_total / fp_total);
    fmt::print("{:<34} {:>12} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>7.1f}%\n",
               "int8 dequantized to fp32 on device", q8.bytes, med(q8.read_ms), med(q8.h2d_ms),
               med(q8.dequant_ms), deq_total, 100 * deq_total / fp_total);
    fmt::print("target (int8 total <= 40% of fp32): on device {}, dequantized {}\n",
               dev_total <= 0.4 * fp_total ? "met" : "NOT met",
               deq_total <= 0.4 * fp_total ? "met" : "NOT met");
    fmt::print("\n{}: {} failed check(s)\n", failures ? "FAILED" : "ok", failures);

    if (!o.json.empty()) {
        const Json settings = {{"part", o.part},
                               {"warmup", o.warmup},
                               {"runs", o.runs},
                               {"cold", o.cold},
                               {"page_cache", o.cold ? "posix_fadvise(DONTNEED) before every read"
                                                     : "warm: read from the page cache after the "
                                                       "first run"},
                               {"host_memory", "pageable (std::vector)"}};
        const auto entry = [&](const Measured& m) {
            Json j{{"dataset", m.dataset},
                   {"feature_type", m.type},
                   {"rows", m.rows},
                   {"cols", m.cols},
                   {"feature_bytes", m.bytes},
                   {"file_bytes", m.file_bytes},
                   {"read_ms", samples_json(m.read_ms)},
                   {"h2d_ms", samples_json(m.h2d_ms)},
                   {"h2d_gb_per_s", m.bytes / (summarize(m.h2d_ms).median * 1e6)}};
            if (!m.dequant_ms.empty()) {
                j["dequant_ms"] = samples_json(m.dequant_ms);
            }
            if (!m.drops.empty()) {
                Json drops = Json::array();
                for (const auto& d : m.drops) {
                    drops.push_back({{"fadvise_ok", d.requested},
                                     {"resident_after", d.resident_after},
                                     {"error", d.error}});
                }
                j["cold_drops"] = std::move(drops);
            }
            return j;
        };
        write_report(o.json, {"halo-bench load", date, command, &device}, settings,
                     {{"fp32", entry(fp)},
                      {"int8", entry(q8)},
                      {"totals_ms",
                       {{"fp32", samples_json(fp.total_device_ms)},
                        {"int8_on_device", samples_json(q8.total_device_ms)},
                        {"int8_dequantized_on_device", samples_json(q8.total_dequant_ms)}}},
                      {"ratio_vs_fp32",
                       {{"int8_on_device", dev_total / fp_total},
                        {"int8_dequantized_on_device", deq_total / fp_total},
                        {"target", 0.4}}},
                      {"checks_failed", failures}});
    }
    return failures ? 3 : 0;
}

}  // namespace

void add_load_command(CLI::App& app, const std::string& command, int& exit_code)
{
    auto o = std::make_shared<LoadBenchOptions>();
    auto* cmd = add_mode(
        app, "load",
        "feature load time, file to device, float32 against int8 features (docs/AES.md, \"Load "
        "time\"): HDF5 read, host-to-device copy, device dequantization; medians per stage",
        o, &run_load, command, exit_code);
    cmd->add_option("--fp32", o->fp32, "dataset with float32 features (halo-partition)")
        ->required()
        ->check(CLI::ExistingFile);
    cmd->add_option("--int8", o->int8,
                    "the same graph partitioned the same way with --quantize int8")
        ->required()
        ->check(CLI::ExistingFile);
    cmd->add_option("--part", o->part, "part whose features are loaded")
        ->check(CLI::Range(0, 1 << 30))
        ->capture_default_str();
    cmd->add_option("--warmup", o->warmup, "untimed loads per dataset")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--runs", o->runs, "timed loads per dataset (median reported)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    cmd->add_flag("--cold", o->cold,
                  "posix_fadvise(POSIX_FADV_DONTNEED) on the file before every read, asking the "
                  "kernel to drop its clean cached pages (the share still cached is reported)");
    cmd->add_option("--device", o->device, "CUDA device index")->capture_default_str();
    cmd->add_option("--json", o->json, "also write the results as JSON to this file");
}

}  // namespace halo::bench_app
