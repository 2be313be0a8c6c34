// The job's phase table: every phase of a run on every rank, reduced over ranks (max and
// mean), printed by halo-infer --report and stored in the manifest. The phases cover the whole run:
// what no named phase measured is its own row ("other"), so the rows add up to the total.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace halo::job {

struct Phase {
    std::string name;
    double seconds = 0.0;
    /// Bytes the phase moved on this rank (read, written, copied); negative where it moves none
    /// worth a rate.
    double bytes = -1.0;
    /// What the row holds beyond its name ("generated on the device", "3 runs"); rank 0's.
    std::string note;
};

/// The phases of one rank in the order they ran. Every rank must add the same names in the same
/// order (a phase that does not apply is added with 0 seconds), since the table reduces them
/// row by row.
class PhaseLog {
public:
    void add(std::string name, double seconds, double bytes = -1.0, std::string note = {});
    /// Adds to the row `name` if it exists (repeated runs), else appends it.
    void accumulate(const std::string& name, double seconds, double bytes = -1.0,
                    std::string note = {});
    const std::vector<Phase>& phases() const { return phases_; }
    double sum_seconds() const;

private:
    std::vector<Phase> phases_;
};

/// Reduces every phase over the ranks of `comm`, adds "other" (total minus the phases) and
/// "total", appends the table as text to `table`, and returns it as JSON rows
/// {name, seconds: {max, mean}, bytes_per_rank: {max, mean}, gb_per_s_per_rank: {min, mean},
/// note}. Collective.
nlohmann::json report_phases(MPI_Comm comm, const PhaseLog& log, double total_seconds,
                             std::string& table);

}  // namespace halo::job
