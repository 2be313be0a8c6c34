#include "halo/core/memory_limits.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "halo/core/error.hpp"

namespace halo {
namespace {

// "MemAvailable:   12345 kB" from /proc/meminfo; 0 where absent.
std::uint64_t meminfo_available()
{
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::uint64_t kib = 0;
    std::string unit;
    while (in >> key >> kib) {
        std::getline(in, unit);
        if (key == "MemAvailable:") {
            return kib * 1024;
        }
    }
    return 0;
}

// cgroup v2 memory.max of this process's group ("max" or absent: no limit).
std::uint64_t cgroup_limit()
{
    std::ifstream cgroup("/proc/self/cgroup");
    std::string line;
    std::string path;
    while (std::getline(cgroup, line)) {
        if (line.rfind("0::", 0) == 0) {
            path = line.substr(3);
        }
    }
    std::ifstream in("/sys/fs/cgroup" + path + "/memory.max");
    std::string value;
    if (!(in >> value) || value == "max") {
        return std::numeric_limits<std::uint64_t>::max();
    }
    char* end = nullptr;
    const auto limit = std::strtoull(value.c_str(), &end, 10);
    return end != nullptr && *end == '\0' && limit > 0 ? limit
                                                       : std::numeric_limits<std::uint64_t>::max();
}

}  // namespace

std::uint64_t available_memory_bytes()
{
    auto bytes = meminfo_available();
    if (bytes == 0) {
        const long pages = ::sysconf(_SC_PHYS_PAGES);
        const long page_size = ::sysconf(_SC_PAGESIZE);
        bytes = pages > 0 && page_size > 0
                    ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size)
                    : std::numeric_limits<std::uint64_t>::max();
    }
    bytes = std::min(bytes, cgroup_limit());
    if (const char* cap = std::getenv("HALO_MEMORY_LIMIT_BYTES"); cap != nullptr && *cap != '\0') {
        char* end = nullptr;
        const auto limit = std::strtoull(cap, &end, 10);
        if (end != nullptr && *end == '\0') {
            bytes = std::min<std::uint64_t>(bytes, limit);
        }
    }
    return bytes;
}

void check_allocation(std::string_view where, std::string_view what, double bytes)
{
    const auto available = static_cast<double>(available_memory_bytes());
    if (bytes > available) {
        constexpr double gib = 1024.0 * 1024.0 * 1024.0;
        std::ostringstream sizes;
        sizes.precision(3);
        sizes << bytes / gib << " GiB, more than the " << available / gib;
        HALO_THROW(InputError, where, ": ", what, " needs ", sizes.str(),
                   " GiB this machine has available (the file is damaged, or too large for one "
                   "rank: partition it into more parts)");
    }
}

}  // namespace halo
