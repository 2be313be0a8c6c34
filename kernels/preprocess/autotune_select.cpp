// The autotuner's selection logic (include/halo/kernels_host/autotune.hpp): warm-up, timed trials,
// median, fastest with ties to the lower index, cache, report. Host only, built with or without
// CUDA.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/kernels_host/autotune.hpp"

namespace halo {
namespace {

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const auto n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string format_ms(double ms)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3f", ms);
    return buf;
}

}  // namespace

AutotuneTable::AutotuneTable(int trials, int warmup) : trials_(trials), warmup_(warmup)
{
    HALO_EXPECTS(trials >= 1, "autotune: trials ", trials, " must be at least 1");
    HALO_EXPECTS(warmup >= 0, "autotune: warmup ", warmup, " must not be negative");
}

const AutotuneChoice& AutotuneTable::choose(const AutotuneKey& key,
                                            const std::vector<std::string>& candidates,
                                            const Measure& measure)
{
    if (const auto it = table_.find(key); it != table_.end()) {
        return it->second;
    }
    HALO_EXPECTS(!candidates.empty(), "autotune: no candidates for ", to_string(key));
    AutotuneChoice choice;
    choice.names = candidates;
    choice.median_ms.assign(candidates.size(), std::numeric_limits<double>::quiet_NaN());
    choice.failures.assign(candidates.size(), std::string{});
    bool any = false;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        std::vector<double> times;
        try {
            for (int w = 0; w < warmup_; ++w) {
                measure(i);
            }
            for (int t = 0; t < trials_; ++t) {
                times.push_back(measure(i));
            }
        } catch (const LogicError& e) {
            choice.failures[i] = e.what();
            continue;
        } catch (const InputError& e) {
            choice.failures[i] = e.what();
            continue;
        }
        for (const double ms : times) {
            HALO_EXPECTS(std::isfinite(ms) && ms >= 0.0, "autotune: candidate ", candidates[i],
                         " measured ", ms, " ms");
        }
        choice.median_ms[i] = median(std::move(times));
        // Strictly faster only: a tie keeps the earlier (lower-index) candidate.
        if (!any || choice.median_ms[i] < choice.median_ms[choice.index]) {
            choice.index = i;
        }
        any = true;
    }
    if (!any) {
        std::string why;
        for (std::size_t i = 0; i < candidates.size(); ++i) {
            why += "; " + candidates[i] + ": " + choice.failures[i];
        }
        HALO_THROW(InputError, "autotune: every candidate failed for ", to_string(key), why);
    }
    return table_.emplace(key, std::move(choice)).first->second;
}

const AutotuneChoice* AutotuneTable::find(const AutotuneKey& key) const
{
    const auto it = table_.find(key);
    return it == table_.end() ? nullptr : &it->second;
}

void AutotuneTable::preload(const AutotuneKey& key, AutotuneChoice choice)
{
    HALO_EXPECTS(table_.count(key) == 0, "autotune: ", to_string(key), " preloaded twice");
    const auto n = choice.names.size();
    if (n == 0 || choice.index >= n || choice.median_ms.size() != n ||
        choice.failures.size() != n || !choice.failures[choice.index].empty() ||
        !std::isfinite(choice.median_ms[choice.index]) || choice.median_ms[choice.index] < 0.0) {
        HALO_THROW(InputError, "autotune: stored choice for ", to_string(key), " is inconsistent (",
                   n, " candidates, choice ", choice.index, ", ", choice.median_ms.size(),
                   " times)");
    }
    choice.stored = true;
    table_.emplace(key, std::move(choice));
}

std::string to_string(const AutotuneKey& key)
{
    return "rows [" + std::to_string(key.begin) + ", " + std::to_string(key.end) +
           ") d=" + std::to_string(key.width) +
           (key.x_type == FeatureType::fp32 ? "" : " " + to_string(key.x_type));
}

std::string AutotuneTable::report() const
{
    std::string out;
    for (const auto& [key, c] : table_) {
        out += to_string(key) + ": " + c.names[c.index] + " " + format_ms(c.median_ms[c.index]) +
               " ms";
        bool first = true;
        for (std::size_t i = 0; i < c.names.size(); ++i) {
            if (i == c.index) {
                continue;
            }
            out += (first ? " (" : ", ") + c.names[i] + " " +
                   (c.failures[i].empty() ? format_ms(c.median_ms[i]) : "failed: " + c.failures[i]);
            first = false;
        }
        out += first ? "" : ")";
        out += c.stored ? " [stored]\n" : "\n";
    }
    return out;
}

}  // namespace halo
