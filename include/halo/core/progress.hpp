// Progress lines of a long step (a dataset read or write, a partition): every ~10% once the step
// has run a few seconds, with the rate and an estimate of the time left. The tools print them on
// standard error (rank 0; -q silences them). Thread-safe: readers report from their own threads.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

namespace halo {

using ProgressLine = std::function<void(const std::string& line)>;

class ProgressMeter {
public:
    /// `what` names the step ("read part 0"); `total` its size in `unit`s ("GB": bytes / 1e9,
    /// given as `scale`). An empty sink prints nothing. Steps shorter than `quiet_seconds` print
    /// nothing.
    ProgressMeter(ProgressLine sink, std::string what, double total, std::string unit = "GB",
                  double scale = 1e9, double quiet_seconds = 3.0);
    /// Adds `amount` (in the unit times `scale`, e.g. bytes) to what is done.
    void advance(double amount);
    /// What is done so far, absolute.
    void set(double done);

private:
    void report_locked();

    ProgressLine sink_;
    std::string what_;
    double total_;
    std::string unit_;
    double scale_;
    double quiet_seconds_;
    std::chrono::steady_clock::time_point start_;
    std::mutex mutex_;
    double done_ = 0.0;
    int next_tenth_ = 1;
};

}  // namespace halo
