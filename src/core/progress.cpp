#include "halo/core/progress.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace halo {

ProgressMeter::ProgressMeter(ProgressLine sink, std::string what, double total, std::string unit,
                             double scale, double quiet_seconds)
    : sink_(std::move(sink)),
      what_(std::move(what)),
      total_(total * scale),
      unit_(std::move(unit)),
      scale_(scale),
      quiet_seconds_(quiet_seconds),
      start_(std::chrono::steady_clock::now())
{
}

void ProgressMeter::advance(double amount)
{
    const std::lock_guard lock(mutex_);
    done_ += amount;
    report_locked();
}

void ProgressMeter::set(double done)
{
    const std::lock_guard lock(mutex_);
    done_ = done;
    report_locked();
}

void ProgressMeter::report_locked()
{
    if (!sink_ || total_ <= 0.0) {
        return;
    }
    const double share = std::min(done_ / total_, 1.0);
    const int tenth = static_cast<int>(std::floor(share * 10.0 + 1e-9));
    if (tenth < next_tenth_ || next_tenth_ > 9) {
        return;  // 100% is the step's own line
    }
    next_tenth_ = tenth + 1;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < quiet_seconds_ || share <= 0.0) {
        return;
    }
    const double left = elapsed * (1.0 - share) / share;
    sink_(fmt::format("{}: {:.0f}% ({:.4g} of {:.4g} {}, {:.3g} {}/s), about {:.0f} s left", what_,
                      share * 100.0, done_ / scale_, total_ / scale_, unit_,
                      done_ / scale_ / elapsed, unit_, std::ceil(left)));
}

}  // namespace halo
