// The one read that HDF5 itself may crash or hang on, run in a child process.
//
// HDF5 1.10.8 reads a variable-length string from the file's global heap (H5HG_read) without
// checking the heap: a corrupt one made it segfault or loop forever (docs/RELIABILITY.md,
// "Fuzzing"). HaloGNN writes fixed-length strings since, but still reads the variable-length ones
// of older files; the read runs in a forked child, so that a crash or a hang there is an error
// naming the attribute, not the end of the process.
#pragma once

#include <hdf5.h>

#include <chrono>
#include <string>

namespace halo::store {

/// How long read_variable_string_guarded waits for its child before killing it. A healthy read
/// takes well under a millisecond; the fork of a large process some milliseconds.
inline constexpr std::chrono::milliseconds guarded_read_timeout{10'000};

/// Reads the scalar variable-length string attribute `attr`, of string type `type`, in a forked
/// child (fork, H5Aread, the bytes through a pipe, _exit), waiting at most `timeout`. A child
/// killed by a signal, one still running at the deadline (killed then), or one whose answer is
/// cut short is a halo::InputError "<where>: HDF5 crashed (signal 11) reading the variable-length
/// string ...: the file is corrupt"; a failed H5Aread a halo::Hdf5Error, as HALO_HDF5_TRY would
/// raise it. `where` names the attribute (attribute_where). Call it inside a QuietErrors.
std::string read_variable_string_guarded(hid_t attr, hid_t type, const std::string& where,
                                         std::chrono::milliseconds timeout = guarded_read_timeout);

}  // namespace halo::store
