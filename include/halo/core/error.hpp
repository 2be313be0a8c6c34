// Exceptions and precondition checks shared by every HaloGNN module.
//
// Library code reports failures by throwing; it never calls exit(). Each error carries the failed
// call or condition, and the source file and line that raised it. Input errors (a malformed file,
// an out-of-range id) additionally name the input file and the line or dataset at fault, so a user
// can find and fix the offending value. Library-specific check macros (HALO_CUDA_TRY,
// HALO_MPI_TRY, ...) live in the headers that include those libraries (cuda_error.hpp,
// mpi_error.hpp, nccl_error.hpp) and throw the types declared here.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace halo {

/// Base of every HaloGNN exception. what() reads "<message> (at <file>:<line>)".
class Error : public std::runtime_error {
public:
    Error(const std::string& message, const char* file, int line)
        : std::runtime_error(format(message, file, line)), message_(message)
    {
    }

    /// The message without the source location.
    const std::string& message() const noexcept { return message_; }

private:
    static std::string format(const std::string& message, const char* file, int line)
    {
        std::ostringstream os;
        os << message;
        if (file != nullptr) {
            os << " (at " << file << ':' << line << ')';
        }
        return os.str();
    }

    std::string message_;
};

/// A violated precondition or invariant (HALO_EXPECTS).
class LogicError : public Error {
    using Error::Error;
};

/// Bad user input: a malformed or inconsistent file, an out-of-range id, a bad option value.
/// The message names the file and the line (or dataset) and the offending value.
class InputError : public Error {
    using Error::Error;
};

/// A failed system call or I/O operation (open, read, write, rename).
class IoError : public Error {
    using Error::Error;
};

/// Failures reported by the libraries we call; each is raised by its own check macro.
class CudaError : public Error {
    using Error::Error;
};
class CusparseError : public Error {
    using Error::Error;
};
class CublasError : public Error {
    using Error::Error;
};
class NcclError : public Error {
    using Error::Error;
};
class MpiError : public Error {
    using Error::Error;
};
class Hdf5Error : public Error {
    using Error::Error;
};

namespace detail {

template <typename... Args>
std::string concat(Args&&... args)
{
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    return os.str();
}

}  // namespace detail
}  // namespace halo

/// Throws halo::LogicError naming the condition when it does not hold. The message arguments are
/// streamed together: HALO_EXPECTS(n >= 0, "row count ", n, " is negative").
#define HALO_EXPECTS(cond, ...)                                                                   \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            throw ::halo::LogicError(::halo::detail::concat("expected " #cond ": ", __VA_ARGS__), \
                                     __FILE__, __LINE__);                                         \
        }                                                                                         \
    } while (0)

/// Throws the given exception type with a streamed message and the current source location.
#define HALO_THROW(type, ...) throw type(::halo::detail::concat(__VA_ARGS__), __FILE__, __LINE__)
