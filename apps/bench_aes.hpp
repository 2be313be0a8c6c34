// The aes mode of halo-bench (apps/bench_aes.cpp, docs/AES.md): its options and the records that
// its run makes and its report (apps/bench_aes_report.cpp) prints and writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_report.hpp"
#include "halo/kernels_host/aes.hpp"

namespace halo::bench_app::aes {

struct AesBenchOptions {
    GraphOptions graph;
    std::vector<std::int64_t> dims{32, 64, 128, 256};
    std::vector<std::int64_t> ws{16, 32, 64, 128, 256, 512, 1024};
    std::string features = "both";
    std::vector<std::string> scalings{"sample_sum"};
    KernelRunOptions run;
};

// Elements of the checked rows compared against the reference.
struct Check {
    std::int64_t elements = 0;
    std::int64_t bad = 0;
    double max_abs_diff = 0;
};

// Rows (bench_report.hpp): kernel cusparse | int8-exact | aes; params features (fp32 | int8),
// w (null: exact), scaling, dim; measured rel_frobenius_error_vs_exact_fp32; ratio
// speedup_vs_cusparse.

/// Prints the summary table (speed-up and error per W, for every d).
void print_summary(const AesBenchOptions& o, const std::vector<MeasuredRow>& records);

/// Writes the JSON record (the report's header, then settings, sampling, results) to
/// o.run.json.
void write_report(const AesBenchOptions& o, const ReportHeader& header, const CheckSet& cs,
                  const std::vector<AesSampleStats>& stats,
                  const std::vector<MeasuredRow>& records);

}  // namespace halo::bench_app::aes
