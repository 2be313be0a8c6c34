// The maxk mode of halo-bench (apps/bench_maxk.cpp, docs/MAXK.md): its options and the records
// that its run makes and its report (apps/bench_maxk_report.cpp) prints and writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace halo::bench_app::maxk {

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

// Elements of the checked rows compared against the reference.
struct Check {
    std::int64_t elements = 0;
    std::int64_t bad = 0;
    std::int64_t nonfinite = 0;
    double max_rel_error = 0;  // max |y - ref| / sum |terms|
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

/// The cuSPARSE baseline at d = D: its timing, check and compulsory bytes.
struct CusparseRecord {
    Timing time;
    Check check;
    std::int64_t compulsory_bytes = 0;
};

/// Prints the summary table (geomean over k of each variant's speed-ups, per group size) after
/// the cuSPARSE line; returns its JSON ("summary").
Json print_summary(const MaxkOptions& o, const std::vector<SsdRecord>& records,
                   const CusparseRecord& cusparse, double copy_gb_per_s);

/// Writes the JSON record (report_json, then settings, cusparse, topk, ssd, summary) to
/// o.run.json.
void write_report(const MaxkOptions& o, const Json& start, const CheckSet& cs,
                  const CusparseRecord& cusparse, const std::vector<TopkRecord>& topk_records,
                  const std::vector<SsdRecord>& records, Json summary);

}  // namespace halo::bench_app::maxk
