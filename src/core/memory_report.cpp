#include "halo/core/memory_report.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "halo/core/error.hpp"

namespace halo {

std::vector<std::pair<std::string, std::int64_t>> MemoryReport::components() const
{
    return {{"row_pointers", row_pointers},
            {"indices", indices},
            {"values", values},
            {"kernel_metadata", kernel_metadata},
            {"feature_buffers", feature_buffers},
            {"weights", weights},
            {"workspace", workspace},
            {"tuning_scratch", tuning_scratch}};
}

MemoryReport& operator+=(MemoryReport& a, const MemoryReport& b)
{
    a.row_pointers += b.row_pointers;
    a.indices += b.indices;
    a.values += b.values;
    a.kernel_metadata += b.kernel_metadata;
    a.feature_buffers += b.feature_buffers;
    a.weights += b.weights;
    a.workspace += b.workspace;
    a.tuning_scratch += b.tuning_scratch;
    a.nonzeros += b.nonzeros;
    return a;
}

std::string format_bytes(std::int64_t bytes)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (std::fabs(v) >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    char buf[64];
    if (u == 0) {
        std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
    } else {
        std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    }
    return buf;
}

std::string format_memory_report(const MemoryReport& report, const std::string& indent)
{
    std::string out;
    const auto total = report.total();
    char buf[160];
    for (const auto& [name, bytes] : report.components()) {
        std::snprintf(
            buf, sizeof buf, "%s%-16s %12s  %5.1f%%  %7.2f B/nnz\n", indent.c_str(), name.c_str(),
            format_bytes(bytes).c_str(),
            total > 0 ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total) : 0.0,
            report.nonzeros > 0 ? static_cast<double>(bytes) / static_cast<double>(report.nonzeros)
                                : 0.0);
        out += buf;
    }
    std::snprintf(buf, sizeof buf, "%s%-16s %12s  %lld nonzeros, %.2f bytes per nonzero\n",
                  indent.c_str(), "total", format_bytes(total).c_str(),
                  static_cast<long long>(report.nonzeros), report.bytes_per_nonzero());
    out += buf;
    if (report.out_of_core) {
        out += indent + "out of core: row blocks of at most " + format_bytes(report.limit) +
               " (up to " + std::to_string(report.row_blocks) + " blocks per layer)\n";
    } else if (report.limit > 0) {
        out += indent + "in memory, within the limit of " + format_bytes(report.limit) + "\n";
    }
    return out;
}

std::string memory_report_json(const MemoryReport& report)
{
    std::string out = "{";
    for (const auto& [name, bytes] : report.components()) {
        out += "\"" + name + "\": " + std::to_string(bytes) + ", ";
    }
    char bpn[64];
    std::snprintf(bpn, sizeof bpn, "%.4f", report.bytes_per_nonzero());
    out += "\"total\": " + std::to_string(report.total()) +
           ", \"nonzeros\": " + std::to_string(report.nonzeros) +
           ", \"bytes_per_nonzero\": " + bpn +
           ", \"out_of_core\": " + (report.out_of_core ? "true" : "false") +
           ", \"limit\": " + std::to_string(report.limit) +
           ", \"row_blocks\": " + std::to_string(report.row_blocks) + "}";
    return out;
}

std::int64_t parse_byte_size(std::string_view text)
{
    auto fail = [&]() -> std::int64_t {
        HALO_THROW(InputError, "'", std::string(text),
                   "' is not a byte size (a number with an optional unit: B, KB, MB, GB, TB, "
                   "KiB, MiB, GiB, TiB, K, M, G, T; e.g. 24GiB)");
    };
    std::size_t pos = 0;
    while (pos < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[pos])) != 0 || text[pos] == '.')) {
        ++pos;
    }
    if (pos == 0) {
        return fail();
    }
    double number = 0.0;
    try {
        std::size_t used = 0;
        number = std::stod(std::string(text.substr(0, pos)), &used);
        if (used != pos) {
            return fail();
        }
    } catch (const std::exception&) {
        return fail();
    }
    while (pos < text.size() && text[pos] == ' ') {
        ++pos;
    }
    std::string unit;
    for (auto c : text.substr(pos)) {
        unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    double scale = 0.0;
    const std::pair<const char*, double> units[] = {{"", 1.0},
                                                    {"b", 1.0},
                                                    {"kb", 1e3},
                                                    {"mb", 1e6},
                                                    {"gb", 1e9},
                                                    {"tb", 1e12},
                                                    {"kib", 1024.0},
                                                    {"mib", 1048576.0},
                                                    {"gib", 1073741824.0},
                                                    {"tib", 1099511627776.0},
                                                    {"k", 1024.0},
                                                    {"m", 1048576.0},
                                                    {"g", 1073741824.0},
                                                    {"t", 1099511627776.0}};
    for (const auto& [name, s] : units) {
        if (unit == name) {
            scale = s;
        }
    }
    const double bytes = number * scale;
    if (scale == 0.0 || !(bytes >= 0.0) ||
        bytes >= static_cast<double>(std::numeric_limits<std::int64_t>::max())) {
        return fail();
    }
    return static_cast<std::int64_t>(std::llround(bytes));
}

}  // namespace halo
