// Sizes read from files are checked against the machine before anything is allocated: a damaged
// or hostile count (a dataset declaring 10^12 rows) fails with a message naming the file, never
// with an allocation that the kernel's OOM killer answers by killing the rank.
#pragma once

#include <cstdint>
#include <string_view>

namespace halo {

/// Bytes this process may allocate: the smaller of the memory the kernel reports available
/// (/proc/meminfo MemAvailable, else physical memory) and the cgroup limit (memory.max, as under
/// Slurm or a container) when there is one. HALO_MEMORY_LIMIT_BYTES, when set, caps it further
/// (tests, and users who share a node).
std::uint64_t available_memory_bytes();

/// Throws halo::InputError "<where>: <what> needs X GiB, more than the Y GiB this machine has
/// available" when `bytes` exceeds available_memory_bytes(). `bytes` is a double so that callers
/// can multiply counts read from a file without overflow.
void check_allocation(std::string_view where, std::string_view what, double bytes);

}  // namespace halo
