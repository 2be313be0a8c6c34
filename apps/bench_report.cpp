// halo-bench's one report (bench_report.hpp): rows to JSON and text, the document's header.
#include "bench_report.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"

namespace halo::bench_app {

namespace {

// A parameter's text in the table and the progress line.
std::string param_text(const Json& v)
{
    if (v.is_null()) {
        return "-";
    }
    if (v.is_string()) {
        return v.get<std::string>();
    }
    if (v.is_boolean()) {
        return v.get<bool>() ? "on" : "off";
    }
    if (v.is_number_float()) {
        return fmt::format("{:.4g}", v.get<double>());
    }
    return v.dump();
}

std::string ratio_text(const Ratio& r)
{
    return r.value ? fmt::format("{:.3f}x", *r.value) : "-";
}

// Keys in first-seen order over the rows.
template <typename Keys>
std::vector<std::string> union_of(const std::vector<MeasuredRow>& rows, Keys&& keys_of)
{
    std::vector<std::string> out;
    for (const auto& row : rows) {
        for (auto&& key : keys_of(row)) {
            if (std::find(out.begin(), out.end(), key) == out.end()) {
                out.push_back(key);
            }
        }
    }
    return out;
}

}  // namespace

void MeasuredRow::set_compulsory_bytes(std::int64_t bytes, double copy_gb_per_s)
{
    compulsory_bytes = bytes;
    roofline_fraction =
        bench_app::roofline_fraction(static_cast<double>(bytes), time.ms.median, copy_gb_per_s);
}

void MeasuredRow::add_ratio(std::string key, std::string label, double baseline_ms)
{
    Ratio r{std::move(key), std::move(label), std::nullopt};
    if (baseline_ms > 0 && time.ms.median > 0) {
        r.value = baseline_ms / time.ms.median;
    }
    ratios.push_back(std::move(r));
}

double roofline_fraction(double bytes, double median_ms, double copy_gb_per_s)
{
    return bytes / (median_ms * 1e6) / copy_gb_per_s;
}

int count_failures(const std::vector<MeasuredRow>& rows)
{
    return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const MeasuredRow& r) {
        return r.status == "FAILED" || r.status == "ERROR";
    }));
}

Json row_json(const MeasuredRow& row)
{
    Json j;
    j[row.name_key] = row.name;
    for (const auto& [key, value] : row.params.items()) {
        j[key] = value;
    }
    j["status"] = row.status;
    if (!row.message.empty()) {
        j["message"] = row.message;
    }
    if (!row.timed()) {
        return j;
    }
    j["time_ms"] = stats_json(row.time.ms);
    j["buffer_sets"] = row.time.sets;
    if (row.compulsory_bytes) {
        j["compulsory_bytes"] = *row.compulsory_bytes;
    }
    if (row.roofline_fraction) {
        j["roofline_fraction"] = *row.roofline_fraction;
    }
    for (const auto& [key, value] : row.measured.items()) {
        j[key] = value;
    }
    for (const auto& r : row.ratios) {
        j[r.key] = r.value ? Json(*r.value) : Json(nullptr);
    }
    Json check{{row.check.unit, row.check.checked}, {"bad_" + row.check.unit, row.check.bad}};
    for (const auto& [key, value] : row.check.details.items()) {
        check[key] = value;
    }
    j["check"] = std::move(check);
    return j;
}

Json rows_json(const std::vector<MeasuredRow>& rows)
{
    Json list = Json::array();
    for (const auto& r : rows) {
        list.push_back(row_json(r));
    }
    return list;
}

void print_row(const MeasuredRow& row)
{
    std::string line = "  " + row.name;
    for (const auto& [key, value] : row.params.items()) {
        line += fmt::format(" {} {}", key, param_text(value));
    }
    if (!row.timed()) {
        fmt::print("{}: {}: {}\n", line, row.status, row.message);
        std::fflush(stdout);
        return;
    }
    line += fmt::format(": median {:.4f} ms", row.time.ms.median);
    if (row.roofline_fraction) {
        line += fmt::format(", {:.1f}% copy", 100.0 * *row.roofline_fraction);
    }
    for (const auto& r : row.ratios) {
        if (r.value) {  // a baseline measured later in the run is in the table only
            line += fmt::format(", {} {}", r.label, ratio_text(r));
        }
    }
    for (const auto& [header, text] : row.cells) {
        line += fmt::format(", {} {}", header, text);
    }
    fmt::print("{}, bad {} of {} {}: {}\n", line, row.check.bad, row.check.checked, row.check.unit,
               row.status);
    std::fflush(stdout);
}

void print_table(const std::vector<MeasuredRow>& rows, std::string_view legend)
{
    if (rows.empty()) {
        return;
    }
    const auto params = union_of(rows, [](const MeasuredRow& r) {
        std::vector<std::string> keys;
        for (const auto& item : r.params.items()) {
            keys.push_back(item.key());
        }
        return keys;
    });
    const auto ratios = union_of(rows, [](const MeasuredRow& r) {
        std::vector<std::string> labels;
        for (const auto& x : r.ratios) {
            labels.push_back(x.label);
        }
        return labels;
    });
    const auto cells = union_of(rows, [](const MeasuredRow& r) {
        std::vector<std::string> headers;
        for (const auto& c : r.cells) {
            headers.push_back(c.first);
        }
        return headers;
    });

    // The cells of every line, the header first; the last column (status) is not padded.
    std::vector<std::string> header{rows.front().name_key};
    header.insert(header.end(), params.begin(), params.end());
    for (const auto* h : {"sets", "median ms", "min ms", "max ms", "%copy"}) {
        header.emplace_back(h);
    }
    header.insert(header.end(), ratios.begin(), ratios.end());
    header.insert(header.end(), cells.begin(), cells.end());
    header.emplace_back("bad");
    header.emplace_back("status");
    std::vector<std::vector<std::string>> lines{header};
    for (const auto& r : rows) {
        std::vector<std::string> line{r.name};
        for (const auto& key : params) {
            line.push_back(r.params.contains(key) ? param_text(r.params[key]) : "-");
        }
        const bool timed = r.timed();
        const auto ms = [&](double v) { return timed ? fmt::format("{:.4f}", v) : "-"; };
        line.push_back(timed ? std::to_string(r.time.sets) : "-");
        line.push_back(ms(r.time.ms.median));
        line.push_back(ms(r.time.ms.min));
        line.push_back(ms(r.time.ms.max));
        line.push_back(timed && r.roofline_fraction
                           ? fmt::format("{:.1f}%", 100.0 * *r.roofline_fraction)
                           : "-");
        for (const auto& label : ratios) {
            const auto it = std::find_if(r.ratios.begin(), r.ratios.end(),
                                         [&](const Ratio& x) { return x.label == label; });
            line.push_back(timed && it != r.ratios.end() ? ratio_text(*it) : "-");
        }
        for (const auto& h : cells) {
            const auto it = std::find_if(r.cells.begin(), r.cells.end(),
                                         [&](const auto& c) { return c.first == h; });
            line.push_back(timed && it != r.cells.end() ? it->second : "-");
        }
        line.push_back(timed ? fmt::format("{}/{}", r.check.bad, r.check.checked) : "-");
        line.push_back(r.message.empty() || timed ? r.status : r.status + ": " + r.message);
        lines.push_back(std::move(line));
    }
    std::vector<std::size_t> width(header.size(), 0);
    for (const auto& line : lines) {
        for (std::size_t c = 0; c < line.size(); ++c) {
            width[c] = std::max(width[c], line[c].size());
        }
    }
    fmt::print("\n");
    for (const auto& line : lines) {
        std::string text;
        for (std::size_t c = 0; c < line.size(); ++c) {
            if (c + 1 == line.size()) {
                text += line[c];
            } else if (c == 0) {  // the name left-aligned, the rest right-aligned
                text += fmt::format("{:<{}} ", line[c], width[c]);
            } else {
                text += fmt::format("{:>{}} ", line[c], width[c]);
            }
        }
        fmt::print("{}\n", text);
    }
    fmt::print(
        "sets: buffer sets the runs rotated over; %copy: compulsory bytes / median / the "
        "measured copy bandwidth; vs: the baseline's median (same run) / this median; "
        "bad: wrong {} of those checked\n",
        rows.front().check.unit);
    if (!legend.empty()) {
        fmt::print("{}\n", legend);
    }
    std::fflush(stdout);
}

Json header_json(const ReportHeader& header)
{
    HALO_EXPECTS((header.graph == nullptr) == (header.graph_options == nullptr),
                 "header_json: a graph goes with its options");
    Json doc{{"tool", header.tool},
             {"date", header.date},
             {"git_commit", git_commit()},
             {"command", header.command}};
    doc["device"] = header.device ? header.device->device_json() : Json{{"name", "cpu"}};
    if (header.graph != nullptr) {
        doc["graph"] = graph_json(*header.graph, *header.graph_options);
    }
    doc["copy_bandwidth"] = header.device ? header.device->copy_json() : Json(nullptr);
    return doc;
}

Json run_settings(const KernelRunOptions& run, const CheckSet* cs)
{
    Json j{{"warmup", run.warmup}, {"runs", run.runs}, {"seed", run.seed}};
    if (cs != nullptr) {
        j["check_rows"] = cs->rows.size();
        j["check_sampled"] = cs->sampled;
    }
    return j;
}

void write_report(const std::string& path, const ReportHeader& header, Json settings,
                  std::vector<std::pair<std::string, Json>> sections)
{
    auto doc = header_json(header);
    doc["settings"] = std::move(settings);
    for (auto& [key, value] : sections) {
        doc[key] = std::move(value);
    }
    write_json(path, doc);
}

}  // namespace halo::bench_app
