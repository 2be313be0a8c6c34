// The maxk mode of halo-bench (apps/bench_maxk.cpp, docs/MAXK.md): its options and the records
// that its run makes and its report (apps/bench_maxk_report.cpp) prints and writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_report.hpp"

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

// Rows (bench_report.hpp): "cusparse" (params dim), "topk" (k; rows checked bit for bit) and the
// SSD variants (name_key "variant"; params k, group_size, order, buffers_per_warp, config; ratios
// speedup_vs_maxk, speedup_vs_maxk_rows, speedup_vs_cusparse, in that order).

/// Prints the summary table (geomean over k of each variant's speed-ups, per group size);
/// returns its JSON ("summary").
Json print_summary(const MaxkOptions& o, const std::vector<MeasuredRow>& records);

/// Writes the JSON record (the report's header, then settings, cusparse, topk, ssd, summary) to
/// o.run.json.
void write_report(const MaxkOptions& o, const ReportHeader& header, const CheckSet& cs,
                  const MeasuredRow& cusparse, const std::vector<MeasuredRow>& topk_records,
                  const std::vector<MeasuredRow>& records, Json summary);

}  // namespace halo::bench_app::maxk
