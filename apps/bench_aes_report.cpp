// halo-bench aes's report (bench_aes.hpp): the summary table and the JSON record.
#include <fmt/core.h>

#include <string>
#include <utility>
#include <vector>

#include "bench_aes.hpp"

namespace halo::bench_app::aes {

// Speed-up and error per W (the median over widths of each).
void print_summary(const AesBenchOptions& o, const std::vector<Record>& records)
{
    fmt::print("\n{:<6} {:<10} {:<5} {:>22} {:>24}\n", "W", "scaling", "feat",
               "speed-up vs cusparse", "rel. Frobenius error");
    for (const auto w : o.ws) {
        for (const auto& s : o.scalings) {
            for (const std::string f : {"fp32", "int8"}) {
                std::string line;
                for (const auto& r : records) {
                    if (r.kernel == "aes" && r.w == w && r.scaling == s && r.features == f &&
                        r.status != "ERROR") {
                        line +=
                            fmt::format(" d{}: {:.2f}x {:.2e}", r.dim, r.speedup, r.rel_frobenius);
                    }
                }
                if (!line.empty()) {
                    fmt::print("{:<6} {:<10} {:<5}{}\n", w, s, f, line);
                }
            }
        }
    }
}

void write_report(const AesBenchOptions& o, const Json& start, const CheckSet& cs,
                  const std::vector<AesSampleStats>& stats, const std::vector<Record>& records)
{
    Json doc = start;
    doc["settings"] = {{"dims", o.dims},
                       {"ws", o.ws},
                       {"features", o.features},
                       {"scalings", o.scalings},
                       {"warmup", o.run.warmup},
                       {"runs", o.run.runs},
                       {"seed", o.run.seed},
                       {"check_rows", cs.rows.size()},
                       {"check_sampled", cs.sampled}};
    Json sampling = Json::array();
    for (std::size_t i = 0; i < o.ws.size(); ++i) {
        const auto& s = stats[i];
        sampling.push_back({{"w", o.ws[i]},
                            {"sampled_rows", s.sampled_rows},
                            {"staged_nonzeros", s.slots},
                            {"distinct_nonzeros", s.distinct},
                            {"staged_fraction", s.slot_fraction()},
                            {"distinct_fraction", s.distinct_fraction()}});
    }
    doc["sampling"] = std::move(sampling);
    Json list = Json::array();
    for (const auto& r : records) {
        Json j{{"kernel", r.kernel},
               {"features", r.features},
               {"w", r.w > 0 ? Json(r.w) : Json(nullptr)},
               {"scaling", r.scaling},
               {"dim", r.dim},
               {"status", r.status}};
        if (r.status == "ERROR") {
            j["message"] = r.message;
        } else {
            j["time_ms"] = stats_json(r.ms);
            j["buffer_sets"] = r.sets;
            j["speedup_vs_cusparse"] = r.speedup;
            j["rel_frobenius_error_vs_exact_fp32"] = r.rel_frobenius;
            j["compulsory_bytes"] = r.compulsory_bytes;
            j["roofline_fraction"] = r.roofline_fraction;
            j["check"] = {
                {"elements", r.check.elements},
                {"bad_elements", r.check.bad},
                {"max_abs_diff", r.check.max_abs_diff},
                {"rule", r.kernel == "cusparse" ? "tolerance"
                                                : "bit-exact up to 128 slots, else tolerance"}};
        }
        list.push_back(std::move(j));
    }
    doc["results"] = std::move(list);
    write_json(o.run.json, doc);
}

}  // namespace halo::bench_app::aes
