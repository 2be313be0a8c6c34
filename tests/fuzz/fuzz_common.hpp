// Shared by the libFuzzer targets (one per file parser; docs/RELIABILITY.md): the input written to
// a file (the parsers read paths, as the tools do), and the rule of what counts as a finding.
//
// A halo::Error is the expected answer to a bad input and ends the run quietly. Anything else is a
// finding: another exception escapes (std::terminate), a sanitizer reports, or memory beyond the
// cap below is asked for. HALO_MEMORY_LIMIT_BYTES caps the readers' size checks
// (halo/core/memory_limits.hpp) at 1 GiB, under libFuzzer's 2 GiB -malloc_limit_mb, so that a size
// the readers accept but cannot serve is a crash here, not a pass.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "halo/core/error.hpp"

namespace halo::fuzz {

/// A scratch directory of this process (libFuzzer runs one input at a time per process).
inline const std::filesystem::path& scratch_dir()
{
    static const std::filesystem::path dir = [] {
        const char* tmp = std::getenv("TMPDIR");
        auto d = std::filesystem::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") /
                 ("halo-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        return d;
    }();
    return dir;
}

/// Writes `bytes` to <scratch>/<name> and returns the path.
inline std::filesystem::path write_input(std::string_view bytes, const std::string& name)
{
    const auto path = scratch_dir() / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
        std::abort();  // the harness itself failed: not a finding about the parser
    }
    return path;
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size)
{
    return {reinterpret_cast<const char*>(data), size};
}

/// Sets the memory cap once, before the first input.
inline void initialize()
{
    ::setenv("HALO_MEMORY_LIMIT_BYTES", "1073741824", 0);
    ::setenv("OMP_NUM_THREADS", "1", 0);
}

/// Runs one parse: a halo::Error is a clean rejection.
template <typename Body>
int run_one(Body&& body)
{
    try {
        body();
    } catch (const halo::Error&) {
    }
    return 0;
}

}  // namespace halo::fuzz

#define HALO_FUZZ_INITIALIZE                           \
    extern "C" int LLVMFuzzerInitialize(int*, char***) \
    {                                                  \
        ::halo::fuzz::initialize();                    \
        return 0;                                      \
    }
