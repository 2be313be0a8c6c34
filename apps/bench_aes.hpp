// The aes mode of halo-bench (apps/bench_aes.cpp, docs/AES.md): its options and the records that
// its run makes and its report (apps/bench_aes_report.cpp) prints and writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"
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

// One kernel at one W and d.
struct Record {
    std::string kernel;    // cusparse | int8-exact | aes
    std::string features;  // fp32 | int8
    std::int64_t w = 0;    // 0: exact
    std::string scaling;
    std::int64_t dim = 0;
    std::string status;  // ok | FAILED | ERROR
    std::string message;
    Stats ms;
    std::int64_t sets = 0;
    Check check;
    double rel_frobenius = 0;
    std::int64_t compulsory_bytes = 0;
    double roofline_fraction = 0;
    double speedup = 0;
};

/// Prints the summary table (speed-up and error per W, for every d).
void print_summary(const AesBenchOptions& o, const std::vector<Record>& records);

/// Writes the JSON record (report_json, then settings, sampling, results) to o.run.json.
void write_report(const AesBenchOptions& o, const Json& start, const CheckSet& cs,
                  const std::vector<AesSampleStats>& stats, const std::vector<Record>& records);

}  // namespace halo::bench_app::aes
