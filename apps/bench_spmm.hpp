// The SpMM mode of halo-bench (apps/bench_spmm.cpp): its kernels, the correctness check
// (apps/bench_spmm_check.cpp), and one kernel's measurement at one width with its record, table
// and JSON (apps/bench_spmm_measure.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_report.hpp"
#include "bench_util.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/kernels_host/gather_model.hpp"

namespace halo::bench_app::spmm {

namespace bench = halo::cuda::bench;

// (context, operator, widest d, SpmmPlanRequest::l2_hints: halo-bench --l2-hints).
using PlanFactory =
    std::function<std::unique_ptr<halo::SpmmPlan>(cuda::Context&, const halo::Csr&, std::int64_t,
                                                  bool)>;

struct KernelEntry {
    std::string name;
    std::string description;
    PlanFactory make;
};

inline constexpr const char* kBaseline = "cusparse";

// ---------------------------------------------------------------------------------------------
// The correctness check: which rows, their reference, and the comparison.

// The checked rows (bench_common.hpp) with |a_ik| of each, for the tolerance scale.
struct CheckSet : bench_app::CheckSet {
    std::vector<float> abs_values;  // |sub.values| (empty for a pattern matrix)
};

CheckSet make_check_set(const halo::Csr& a, std::int64_t sample_rows, std::uint64_t seed);

// Reference values of the checked rows for one X, and the scale of each element's tolerance:
// s_ij = sum_k |a_ik| |x_kj|, the largest magnitude the sum can reach on the way.
struct Reference {
    std::vector<float> values;
    std::vector<float> scale;
};

// With a low-precision `type`, the reference reads X rounded to it on the host, exactly as the
// device conversion rounds it (halo::round_features), so only the fp32 summation order differs.
Reference make_reference(const CheckSet& cs, const float* x, std::int64_t x_rows, std::int64_t dim,
                         cudaStream_t stream, halo::FeatureType type = halo::FeatureType::fp32);

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
                    std::int64_t dim);

// Poisons every element of y with NaN, runs the plan once over all rows (run_once), and compares
// the checked rows with the reference.
CheckResult checked_run(const std::function<void()>& run_once, const CheckSet& cs,
                        const Reference& ref, float* y, const halo::Csr& a, std::int64_t dim,
                        cudaStream_t stream);

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

// X read once in its element type, Y written once in fp32, the matrix read once.
std::int64_t compulsory_bytes(const halo::Csr& a, std::int64_t dim,
                              halo::FeatureType x_type = halo::FeatureType::fp32);

// ---------------------------------------------------------------------------------------------
// The gather-bound limit (include/halo/kernels_host/gather_model.hpp, bench/README.md): the X-row
// misses of A's gathers in CSR order through each modelled cache, for every X row width the run
// times.

class GatherModel {
public:
    /// Prints the model's misses; with cache_mib {0}, no model (bytes() then returns none).
    GatherModel(const halo::Csr& a, const std::vector<double>& cache_mib,
                std::int64_t l2_cache_bytes, const std::vector<std::int64_t>& dims,
                const std::vector<halo::FeatureType>& types);

    /// The record's gather bytes for each cache (none when the model is off).
    std::vector<Record::Gather> bytes(const halo::Csr& a, std::int64_t dim,
                                      halo::FeatureType type) const;

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
void measure(Kernel& kernel, Record& rec, const KernelRunOptions& run, const halo::Csr& a,
             const CheckSet& cs, const BufferSets& sets, const std::vector<Reference>& refs,
             double copy_gb_per_s, const GatherModel& gather, cudaStream_t stream);

/// "12.3%" of the gather-bound limit, or "-" without a gather model.
std::string format_gather(const Record& r);

/// A record as the report's row (only name, params, status and message for ERROR and SKIPPED).
MeasuredRow measured_row(const Record& r);

/// The table of every record (bench_report.hpp's print_table), with the legend of its columns.
void print_table(const std::vector<Record>& records);

}  // namespace halo::bench_app::spmm
