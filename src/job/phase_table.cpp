#include "phase_table.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "halo/core/error.hpp"
#include "halo/mpi/mpi_error.hpp"

namespace halo::job {

void PhaseLog::add(std::string name, double seconds, double bytes, std::string note)
{
    phases_.push_back({std::move(name), seconds, bytes, std::move(note)});
}

void PhaseLog::accumulate(const std::string& name, double seconds, double bytes, std::string note)
{
    const auto it = std::find_if(phases_.begin(), phases_.end(),
                                 [&](const Phase& p) { return p.name == name; });
    if (it == phases_.end()) {
        add(name, seconds, bytes, std::move(note));
        return;
    }
    it->seconds += seconds;
    if (bytes >= 0.0) {
        it->bytes = std::max(it->bytes, 0.0) + bytes;
    }
    if (!note.empty()) {
        it->note = std::move(note);
    }
}

double PhaseLog::sum_seconds() const
{
    double sum = 0.0;
    for (const auto& p : phases_) {
        sum += p.seconds;
    }
    return sum;
}

nlohmann::json report_phases(MPI_Comm comm, const PhaseLog& log, double total_seconds,
                             std::string& table)
{
    int size = 1;
    HALO_MPI_TRY(MPI_Comm_size(comm, &size));
    auto rows = log.phases();
    rows.push_back({"other (between phases)", std::max(0.0, total_seconds - log.sum_seconds()),
                    -1.0, "barriers, reductions, host bookkeeping"});
    rows.push_back({"total", total_seconds, -1.0, "process start to this table"});
    // Every rank must hold the same rows: a count mismatch would pair the wrong phases.
    const auto count = static_cast<int>(rows.size());
    int min_count = 0;
    int max_count = 0;
    HALO_MPI_TRY(MPI_Allreduce(&count, &min_count, 1, MPI_INT, MPI_MIN, comm));
    HALO_MPI_TRY(MPI_Allreduce(&count, &max_count, 1, MPI_INT, MPI_MAX, comm));
    HALO_EXPECTS(min_count == max_count, "phase table: ranks logged ", min_count, " to ", max_count,
                 " phases");

    // Per row: seconds (max, sum), bytes (max, sum), rate (min, sum) in one reduction each.
    const auto n = rows.size();
    std::vector<double> maxes(3 * n);
    std::vector<double> sums(3 * n);
    std::vector<double> mins(n);
    for (std::size_t i = 0; i < n; ++i) {
        const auto& r = rows[i];
        const double rate = r.bytes >= 0.0 && r.seconds > 0.0 ? r.bytes / r.seconds / 1e9 : 0.0;
        maxes[3 * i] = r.seconds;
        maxes[3 * i + 1] = r.bytes;
        maxes[3 * i + 2] = rate;
        sums[3 * i] = r.seconds;
        sums[3 * i + 1] = std::max(r.bytes, 0.0);
        sums[3 * i + 2] = rate;
        mins[i] = rate;
    }
    std::vector<double> max_out(3 * n);
    std::vector<double> sum_out(3 * n);
    std::vector<double> min_out(n);
    HALO_MPI_TRY(MPI_Allreduce(maxes.data(), max_out.data(), static_cast<int>(3 * n), MPI_DOUBLE,
                               MPI_MAX, comm));
    HALO_MPI_TRY(MPI_Allreduce(sums.data(), sum_out.data(), static_cast<int>(3 * n), MPI_DOUBLE,
                               MPI_SUM, comm));
    HALO_MPI_TRY(
        MPI_Allreduce(mins.data(), min_out.data(), static_cast<int>(n), MPI_DOUBLE, MPI_MIN, comm));

    nlohmann::json out = nlohmann::json::array();
    {
        table += fmt::format("{:<28} {:>10} {:>10} {:>12} {:>17}  {}\n", "phase", "max s", "mean s",
                             "bytes/rank", "GB/s min/mean", "note");
    }
    for (std::size_t i = 0; i < n; ++i) {
        const auto& r = rows[i];
        const double max_s = max_out[3 * i];
        const double mean_s = sum_out[3 * i] / size;
        const bool has_bytes = max_out[3 * i + 1] >= 0.0;
        const double mean_bytes = sum_out[3 * i + 1] / size;
        const double min_rate = min_out[i];
        const double mean_rate = sum_out[3 * i + 2] / size;
        nlohmann::json row{{"name", r.name}, {"seconds", {{"max", max_s}, {"mean", mean_s}}}};
        if (has_bytes) {
            row["bytes_per_rank"] = {{"max", max_out[3 * i + 1]}, {"mean", mean_bytes}};
            row["gb_per_s_per_rank"] = {{"min", min_rate}, {"mean", mean_rate}};
        }
        if (!r.note.empty()) {
            row["note"] = r.note;
        }
        out.push_back(row);
        {
            const auto bytes = has_bytes ? fmt::format("{:.3f} GB", mean_bytes / 1e9) : "";
            const auto rate =
                has_bytes && max_s > 0.0 ? fmt::format("{:.2f} / {:.2f}", min_rate, mean_rate) : "";
            table += fmt::format("{:<28} {:>10.3f} {:>10.3f} {:>12} {:>17}  {}\n", r.name, max_s,
                                 mean_s, bytes, rate, r.note);
        }
    }
    return out;
}

}  // namespace halo::job
