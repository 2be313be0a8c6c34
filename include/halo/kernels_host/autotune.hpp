// Autotuned kernel selection (host only, no CUDA): for each (row range, dense width) the exact
// SpMM candidates are timed a few times and the fastest is kept, so that the choice is made once
// on the real operands and every later run of that shape takes it without measuring again. The
// CUDA plan built on it is include/halo/kernels/cuda/autotune.hpp; the timing itself is a callback,
// so the logic is tested on the CPU with fake timings.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "halo/core/feature_type.hpp"

namespace halo {

/// What a choice is made for: rows [begin, end) at dense width `width`, X stored as `x_type`
/// (16-bit rows halve the bytes gathered, so the fastest kernel may differ: a choice per type).
struct AutotuneKey {
    std::int64_t begin = 0;
    std::int64_t end = 0;
    std::int64_t width = 0;
    FeatureType x_type = FeatureType::fp32;
    auto operator<=>(const AutotuneKey&) const = default;
};

/// "rows [0, 812) d=64", with " bf16" / " fp16" after the width for 16-bit X.
std::string to_string(const AutotuneKey& key);

/// The outcome for one key: the winner and every candidate's median (or why it failed).
struct AutotuneChoice {
    std::size_t index = 0;              // into `names`
    std::vector<std::string> names;     // the candidates, in the order given
    std::vector<double> median_ms;      // per candidate; NaN when it failed
    std::vector<std::string> failures;  // per candidate; empty when it ran
    bool stored = false;                // loaded from the dataset, not measured in this process
};

class AutotuneTable {
public:
    /// Each candidate runs `warmup` untimed calls, then `trials` timed ones; the median decides.
    explicit AutotuneTable(int trials = 3, int warmup = 1);

    /// measure(i) runs candidate i once and returns its time in milliseconds.
    using Measure = std::function<double(std::size_t)>;

    /// The cached choice for `key`, or, on its first request, the fastest median over
    /// `candidates` (ties: the lower index). A candidate whose measure throws halo::LogicError or
    /// halo::InputError (a kernel rejecting a shape) is skipped and its message kept for report();
    /// other exceptions (device failures) propagate. Throws halo::InputError naming the key and
    /// every failure when no candidate ran, and halo::LogicError when `candidates` is empty or a
    /// measured time is negative or not finite.
    const AutotuneChoice& choose(const AutotuneKey& key, const std::vector<std::string>& candidates,
                                 const Measure& measure);

    /// The cached choice for `key`, or null.
    const AutotuneChoice* find(const AutotuneKey& key) const;
    std::size_t size() const noexcept { return table_.size(); }
    const std::map<AutotuneKey, AutotuneChoice>& entries() const noexcept { return table_; }

    /// Adds a choice made earlier (stored in the dataset) so that choose() returns it without
    /// measuring; marks it stored. Throws halo::InputError when the choice is inconsistent (index
    /// outside names, medians or failures of another length, a winner that failed) and
    /// halo::LogicError when `key` is already in the table.
    void preload(const AutotuneKey& key, AutotuneChoice choice);

    /// One line per key, in key order:
    /// "rows [0, 812) d=64: mergepath 0.021 ms (cusparse 0.034, accel_gcn 0.025, rowsplit 0.090)"
    /// (the key as to_string(AutotuneKey) writes it)
    /// with "name failed: message" in the parentheses for a skipped candidate, and " [stored]"
    /// at the end of a preloaded choice.
    std::string report() const;

private:
    int trials_;
    int warmup_;
    std::map<AutotuneKey, AutotuneChoice> table_;
};

}  // namespace halo
