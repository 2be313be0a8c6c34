// The one report of every halo-bench mode (bench/README.md): a measured row per kernel (or
// variant) and problem, the JSON document every mode writes (the same header: tool, date,
// commit, command line, device, graph, copy bandwidth; then the mode's settings and sections of
// rows) and the text table every mode prints. A mode fills MeasuredRows while it measures, prints
// each with print_row as it comes, and at the end print_table and write_report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_common.hpp"

namespace halo::bench_app {

/// What a row's correctness check compared: `checked` `unit` ("elements" or "rows"), `bad` of
/// them wrong (outside the mode's tolerance, or not finite). JSON: "check": {unit: checked,
/// "bad_" + unit: bad, details...}.
struct RowCheck {
    std::string unit = "elements";
    std::int64_t checked = 0;
    std::int64_t bad = 0;
    Json details = Json::object();  // the mode's error measures (max_rel_error, ...)
};

/// A speed-up against a baseline measured in the same run: baseline median / this median.
struct Ratio {
    std::string key;              // JSON: "speedup_vs_<baseline>"
    std::string label;            // table column: "vs <baseline>"
    std::optional<double> value;  // none (JSON null): the baseline was not measured
};

/// One kernel (or variant) on one problem, measured.
struct MeasuredRow {
    std::string name_key = "kernel";  // the JSON key of `name`
    std::string name;
    Json params = Json::object();  // the problem and the variant's settings, in order (JSON, table)
    std::string status;            // ok | FAILED | ERROR | SKIPPED
    std::string message;           // why ERROR or SKIPPED (or a note)
    Timing time;                   // median, min, max ms over the runs; buffer sets rotated over
    std::optional<std::int64_t> compulsory_bytes;  // the bytes it must move at least
    std::optional<double> roofline_fraction;       // compulsory bytes / median / copy bandwidth
    std::vector<Ratio> ratios;
    RowCheck check;
    Json measured = Json::object();  // the mode's further measured fields (JSON, after the time)
    std::vector<std::pair<std::string, std::string>> cells;  // further table columns (header, text)

    /// A timed row (ok or FAILED): ERROR and SKIPPED rows have no time.
    bool timed() const { return status != "ERROR" && status != "SKIPPED"; }
    /// compulsory_bytes, and roofline_fraction against `copy_gb_per_s` (the measured copy).
    void set_compulsory_bytes(std::int64_t bytes, double copy_gb_per_s);
    /// Appends the speed-up against a baseline median of `baseline_ms` (none when not > 0).
    void add_ratio(std::string key, std::string label, double baseline_ms);
    /// "ok", or "FAILED" with a bad check.
    void set_checked_status() { status = check.bad > 0 ? "FAILED" : "ok"; }
};

/// bytes / (median_ms * 1e6) / copy_gb_per_s: the fraction of the copy bandwidth achieved.
double roofline_fraction(double bytes, double median_ms, double copy_gb_per_s);

/// Rows whose status is FAILED or ERROR.
int count_failures(const std::vector<MeasuredRow>& rows);

/// One row's JSON: name_key: name, the params, status, message (when set); for a timed row then
/// time_ms, buffer_sets, compulsory_bytes, roofline_fraction (when set), the measured fields,
/// the ratios and check.
Json row_json(const MeasuredRow& row);
Json rows_json(const std::vector<MeasuredRow>& rows);

/// One line of a row as it is measured: name, params, median, %copy, the ratios known by then,
/// the further cells, bad of checked, status.
void print_row(const MeasuredRow& row);

/// The table of `rows` (columns: the name, every param, sets, median/min/max ms, %copy, the
/// ratios, the further cells, bad of checked, status; "-" where a row has none), then `legend`.
void print_table(const std::vector<MeasuredRow>& rows, std::string_view legend = {});

/// The header every JSON report starts with.
struct ReportHeader {
    std::string tool;                             // "halo-bench", "halo-bench maxk", ...
    std::string date;                             // utc_now_iso() at the start
    std::string command;                          // the whole command line
    const BenchDevice* device = nullptr;          // null: no device opened (--e2e --backend cpu)
    const BenchGraph* graph = nullptr;            // null: no graph (halo-bench load)
    const GraphOptions* graph_options = nullptr;  // with graph
};

/// {"tool", "date", "git_commit", "command", "device" (BenchDevice::device_json, or {"name":
/// "cpu"} without one), "graph" (graph_json; left out without a graph), "copy_bandwidth"
/// (BenchDevice::copy_json, or null without a device)}.
Json header_json(const ReportHeader& header);

/// {"warmup", "runs", "seed"} of the run, and "check_rows" and "check_sampled" of `cs` when set;
/// a mode's settings start with it.
Json run_settings(const KernelRunOptions& run, const CheckSet* cs = nullptr);

/// Writes header_json, then "settings", then `sections` in order (rows_json of a mode's rows,
/// or its own summaries) to `path` (write_json: atomically).
void write_report(const std::string& path, const ReportHeader& header, Json settings,
                  std::vector<std::pair<std::string, Json>> sections);

}  // namespace halo::bench_app
