#include "app_common.hpp"

#include <sys/resource.h>

namespace halo::app {

std::int64_t peak_rss_bytes()
{
    rusage usage{};
    if (getrusage(RUSAGE_SELF, &usage) != 0) {
        return 0;
    }
    return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string format_bytes(double bytes)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        ++u;
    }
    return fmt::format("{:.{}f} {}", bytes, u == 0 ? 0 : 1, units[u]);
}

}  // namespace halo::app
