// halo-bench maxk's report (bench_maxk.hpp): the summary table and the JSON record.
#include <fmt/core.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench_maxk.hpp"

namespace halo::bench_app::maxk {

Json print_summary(const MaxkOptions& o, const std::vector<MeasuredRow>& records)
{
    fmt::print("\n{:<6} {:<14} {:<34} {:>16} {:>22} {:>20}\n", "group", "order", "variant",
               "geomean vs maxk", "geomean vs maxk (rows)", "geomean vs cusparse");
    Json summary = Json::array();
    for (const auto g : o.group_sizes) {
        // Per (order, variant and buffers): the speed-ups against maxk, maxk (rows), cusparse.
        using Key = std::pair<std::string, std::string>;
        std::map<Key, std::vector<std::vector<double>>> by;
        std::vector<Key> seen;
        for (const auto& r : records) {
            if (r.params["group_size"] != g || !r.timed()) {
                continue;
            }
            const auto& b = r.params["buffers_per_warp"];
            const Key key{r.params["order"].get<std::string>(),
                          r.name + (b.is_null() ? "" : fmt::format(" b{}", b.get<int>()))};
            auto [it, added] = by.try_emplace(key, std::vector<std::vector<double>>(3));
            if (added) {
                seen.push_back(key);
            }
            for (std::size_t i = 0; i < 3; ++i) {
                if (r.ratios[i].value) {
                    it->second[i].push_back(*r.ratios[i].value);
                }
            }
        }
        for (const auto& key : seen) {
            const auto& s = by[key];
            const auto gm = geomean(s[0]);
            const auto gr = s[1].empty() ? 0.0 : geomean(s[1]);
            const auto gc = geomean(s[2]);
            fmt::print("{:<6} {:<14} {:<34} {:>15.3f}x {:>21.3f}x {:>19.3f}x\n", g, key.first,
                       key.second, gm, gr, gc);
            summary.push_back({{"group_size", g},
                               {"order", key.first},
                               {"variant", key.second},
                               {"geomean_vs_maxk", gm},
                               {"geomean_vs_maxk_rows", s[1].empty() ? Json(nullptr) : Json(gr)},
                               {"geomean_vs_cusparse", gc},
                               {"ks", o.ks}});
        }
    }
    return summary;
}

void write_report(const MaxkOptions& o, const ReportHeader& header, const CheckSet& cs,
                  const MeasuredRow& cusparse, const std::vector<MeasuredRow>& topk_records,
                  const std::vector<MeasuredRow>& records, Json summary)
{
    auto settings = run_settings(o.run, &cs);
    settings["dim"] = o.dim;
    settings["ks"] = o.ks;
    settings["group_sizes"] = o.group_sizes;
    settings["buffers_per_warp"] = o.buffers;
    settings["orders"] = o.orders;
    settings["warps_per_block"] = o.warps_per_block;
    bench_app::write_report(o.run.json, header, std::move(settings),
                            {{"cusparse", row_json(cusparse)},
                             {"topk", rows_json(topk_records)},
                             {"ssd", rows_json(records)},
                             {"summary", std::move(summary)}});
}

}  // namespace halo::bench_app::maxk
