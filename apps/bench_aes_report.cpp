// halo-bench aes's report (bench_aes.hpp): the summary table and the JSON record.
#include <fmt/core.h>

#include <string>
#include <utility>
#include <vector>

#include "bench_aes.hpp"

namespace halo::bench_app::aes {

// Speed-up and error per W (the median over widths of each).
void print_summary(const AesBenchOptions& o, const std::vector<MeasuredRow>& records)
{
    fmt::print("\n{:<6} {:<10} {:<5} {:>22} {:>24}\n", "W", "scaling", "feat",
               "speed-up vs cusparse", "rel. Frobenius error");
    for (const auto w : o.ws) {
        for (const auto& s : o.scalings) {
            for (const std::string f : {"fp32", "int8"}) {
                std::string line;
                for (const auto& r : records) {
                    const auto& p = r.params;
                    if (r.name == "aes" && p["w"] == w && p["scaling"] == s && p["features"] == f &&
                        r.timed()) {
                        line += fmt::format(
                            " d{}: {:.2f}x {:.2e}", p["dim"].get<std::int64_t>(),
                            r.ratios.front().value.value_or(0.0),
                            r.measured["rel_frobenius_error_vs_exact_fp32"].get<double>());
                    }
                }
                if (!line.empty()) {
                    fmt::print("{:<6} {:<10} {:<5}{}\n", w, s, f, line);
                }
            }
        }
    }
}

void write_report(const AesBenchOptions& o, const ReportHeader& header, const CheckSet& cs,
                  const std::vector<AesSampleStats>& stats, const std::vector<MeasuredRow>& records)
{
    auto settings = run_settings(o.run, &cs);
    settings["dims"] = o.dims;
    settings["ws"] = o.ws;
    settings["features"] = o.features;
    settings["scalings"] = o.scalings;
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
    bench_app::write_report(o.run.json, header, std::move(settings),
                            {{"sampling", std::move(sampling)}, {"results", rows_json(records)}});
}

}  // namespace halo::bench_app::aes
