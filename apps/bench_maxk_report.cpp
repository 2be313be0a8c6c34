// halo-bench maxk's report (bench_maxk.hpp): the summary table and the JSON record.
#include <fmt/core.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench_maxk.hpp"

namespace halo::bench_app::maxk {

Json print_summary(const MaxkOptions& o, const std::vector<SsdRecord>& records,
                   const CusparseRecord& cusparse, double copy_gb_per_s)
{
    fmt::print("\ncusparse SpMM at d = {}: median {:.4f} ms ({:.1f}% of copy)\n", o.dim,
               cusparse.time.ms.median,
               100.0 * double(cusparse.compulsory_bytes) / (cusparse.time.ms.median * 1e6) /
                   copy_gb_per_s);
    fmt::print("{:<6} {:<14} {:<34} {:>16} {:>22} {:>20}\n", "group", "order", "variant",
               "geomean vs maxk", "geomean vs maxk (rows)", "geomean vs cusparse");
    Json summary = Json::array();
    for (const auto g : o.group_sizes) {
        struct Speedups {
            std::vector<double> maxk, maxk_rows, cusparse;
        };
        std::map<std::pair<std::string, std::string>, Speedups> by;
        std::vector<std::pair<std::string, std::string>> seen;
        for (const auto& r : records) {
            if (r.group_size != g || r.status == "ERROR") {
                continue;
            }
            const std::pair<std::string, std::string> key{
                r.order, r.variant + (r.buffers > 0 ? fmt::format(" b{}", r.buffers) : "")};
            if (by.find(key) == by.end()) {
                seen.push_back(key);
            }
            auto& s = by[key];
            if (r.vs_maxk > 0) {
                s.maxk.push_back(r.vs_maxk);
            }
            if (r.vs_maxk_rows > 0) {
                s.maxk_rows.push_back(r.vs_maxk_rows);
            }
            s.cusparse.push_back(r.vs_cusparse);
        }
        for (const auto& key : seen) {
            const auto& s = by[key];
            const auto gm = geomean(s.maxk);
            const auto gr = s.maxk_rows.empty() ? 0.0 : geomean(s.maxk_rows);
            const auto gc = geomean(s.cusparse);
            fmt::print("{:<6} {:<14} {:<34} {:>15.3f}x {:>21.3f}x {:>19.3f}x\n", g, key.first,
                       key.second, gm, gr, gc);
            summary.push_back(
                {{"group_size", g},
                 {"order", key.first},
                 {"variant", key.second},
                 {"geomean_vs_maxk", gm},
                 {"geomean_vs_maxk_rows", s.maxk_rows.empty() ? Json(nullptr) : Json(gr)},
                 {"geomean_vs_cusparse", gc},
                 {"ks", o.ks}});
        }
    }
    return summary;
}

void write_report(const MaxkOptions& o, const Json& start, const CheckSet& cs,
                  const CusparseRecord& cusparse, const std::vector<TopkRecord>& topk_records,
                  const std::vector<SsdRecord>& records, Json summary)
{
    Json doc = start;
    doc["settings"] = {{"dim", o.dim},
                       {"ks", o.ks},
                       {"group_sizes", o.group_sizes},
                       {"buffers_per_warp", o.buffers},
                       {"orders", o.orders},
                       {"warps_per_block", o.warps_per_block},
                       {"warmup", o.run.warmup},
                       {"runs", o.run.runs},
                       {"seed", o.run.seed},
                       {"check_rows", cs.rows.size()},
                       {"check_sampled", cs.sampled}};
    doc["cusparse"] = {
        {"dim", o.dim},
        {"time_ms", stats_json(cusparse.time.ms)},
        {"buffer_sets", cusparse.time.sets},
        {"compulsory_bytes", cusparse.compulsory_bytes},
        {"check",
         {{"elements", cusparse.check.elements}, {"bad_elements", cusparse.check.bad}}}};
    Json topk = Json::array();
    for (const auto& t : topk_records) {
        topk.push_back({{"k", t.k},
                        {"time_ms", stats_json(t.time.ms)},
                        {"buffer_sets", t.time.sets},
                        {"roofline_fraction", t.roofline_fraction},
                        {"checked_rows", t.checked_rows},
                        {"mismatched_rows", t.mismatched_rows}});
    }
    doc["topk"] = std::move(topk);
    Json list = Json::array();
    for (const auto& r : records) {
        Json j{{"k", r.k},
               {"group_size", r.group_size},
               {"order", r.order},
               {"variant", r.variant},
               {"buffers_per_warp", r.buffers > 0 ? Json(r.buffers) : Json(nullptr)},
               {"config", r.config},
               {"status", r.status}};
        if (r.status == "ERROR") {
            j["message"] = r.message;
        } else {
            j["time_ms"] = stats_json(r.time.ms);
            j["buffer_sets"] = r.time.sets;
            j["compulsory_bytes"] = r.compulsory_bytes;
            j["roofline_fraction"] = r.roofline_fraction;
            j["speedup_vs_maxk"] = r.vs_maxk;
            j["speedup_vs_maxk_rows"] =
                r.vs_maxk_rows > 0 ? Json(r.vs_maxk_rows) : Json(nullptr);
            j["speedup_vs_cusparse"] = r.vs_cusparse;
            j["check"] = {{"elements", r.check.elements},
                          {"bad_elements", r.check.bad},
                          {"nonfinite_elements", r.check.nonfinite},
                          {"max_rel_error", r.check.max_rel_error}};
        }
        list.push_back(std::move(j));
    }
    doc["ssd"] = std::move(list);
    doc["summary"] = std::move(summary);
    write_json(o.run.json, doc);
}

}  // namespace halo::bench_app::maxk
