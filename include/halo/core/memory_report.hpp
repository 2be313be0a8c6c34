// Where a rank's backend (device) memory goes, by component (docs/ENGINE.md "Memory accounting"),
// and the byte-size parsing of --device-memory-limit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace halo {

/// Backend bytes by component. In memory: what the engine's operators, plans and buffers hold for
/// the whole run. Out of core: the budget of the largest row block plus what stays resident.
struct MemoryReport {
    std::int64_t row_pointers = 0;     // CSR row offsets of every operator the plans hold
    std::int64_t indices = 0;          // CSR column indices
    std::int64_t values = 0;           // CSR values (0 for a pattern-only operator)
    std::int64_t kernel_metadata = 0;  // kernel preprocessing (block metadata, schedules, CBSR)
    std::int64_t feature_buffers = 0;  // layer inputs, outputs and intermediates
    std::int64_t weights = 0;          // model weights and biases
    std::int64_t workspace = 0;        // library workspaces (cuSPARSE buffers, descriptors' data)
    std::int64_t tuning_scratch = 0;   // the autotuner's timing buffers
    std::int64_t nonzeros = 0;         // nonzeros of the distinct operators counted above
    bool out_of_core = false;
    std::int64_t limit = 0;       // the memory limit in effect (0: none)
    std::int64_t row_blocks = 0;  // out of core: the most row blocks of any layer

    std::int64_t total() const
    {
        return row_pointers + indices + values + kernel_metadata + feature_buffers + weights +
               workspace + tuning_scratch;
    }
    /// total() / nonzeros (0 without nonzeros).
    double bytes_per_nonzero() const
    {
        return nonzeros > 0 ? static_cast<double>(total()) / static_cast<double>(nonzeros) : 0.0;
    }
    /// (name, bytes) in the order above, as the report and the manifest name them.
    std::vector<std::pair<std::string, std::int64_t>> components() const;
};

/// Sums two reports component by component (several operators; a model and its plans).
MemoryReport& operator+=(MemoryReport& a, const MemoryReport& b);

/// "1.50 GiB" (binary units, two decimals; bytes below 1 KiB as "512 B").
std::string format_bytes(std::int64_t bytes);

/// A multi-line table: one line per component with bytes and share, then the total and bytes
/// per nonzero; every line starts with `indent`.
std::string format_memory_report(const MemoryReport& report, const std::string& indent = "  ");

/// The report as one JSON object: {"row_pointers": n, ..., "total": n, "nonzeros": n,
/// "bytes_per_nonzero": x, "out_of_core": b, "limit": n, "row_blocks": n}.
std::string memory_report_json(const MemoryReport& report);

/// Parses a byte size: a number (integer or decimal) with an optional unit B, KB, MB, GB, TB
/// (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024) or K, M, G, T (binary), case-insensitive,
/// spaces allowed before the unit ("24GiB", "1.5 GB", "4096"). Throws halo::InputError naming
/// `text` otherwise, or for a negative or overflowing size.
std::int64_t parse_byte_size(std::string_view text);

}  // namespace halo
