// The lowest layer of the HDF5 store: RAII handles, the HALO_HDF5_TRY check and the error
// messages behind it, the element-type map, and the plain types that the typed I/O
// (hdf5_util.hpp) and the parallel chunk I/O (chunk_io.hpp) share. It includes neither, so the
// store's headers form a chain: hdf5_handle.hpp <- chunk_io.hpp <- hdf5_util.hpp, with
// hdf5_guard.hpp on hdf5_handle.hpp alone.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"

namespace halo::store {

/// Names an object in errors: "<file>: <path>".
struct Where {
    std::string file;
    std::string path = "/";

    Where child(std::string_view name) const
    {
        Where out{file, path};
        if (out.path != "/") {
            out.path += '/';
        }
        out.path.append(name);
        return out;
    }
    std::string str() const { return file + ": " + path; }
};

/// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
public:
    using Closer = herr_t (*)(hid_t);

    Handle() noexcept = default;
    Handle(hid_t id, Closer closer) noexcept : id_(id), closer_(closer) {}
    Handle(Handle&& other) noexcept
        : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_)
    {
    }
    Handle& operator=(Handle&& other) noexcept
    {
        if (this != &other) {
            reset();
            id_ = std::exchange(other.id_, H5I_INVALID_HID);
            closer_ = other.closer_;
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { reset(); }

    hid_t get() const noexcept { return id_; }
    bool valid() const noexcept { return id_ >= 0; }

    /// Closes, ignoring failure (destructors and error paths).
    void reset() noexcept { static_cast<void>(close()); }

    /// Closes and returns the closer's status: a file's close flushes, and its failure matters.
    herr_t close() noexcept
    {
        herr_t status = 0;
        if (id_ >= 0 && closer_ != nullptr) {
            status = closer_(id_);
        }
        id_ = H5I_INVALID_HID;
        return status;
    }

private:
    hid_t id_ = H5I_INVALID_HID;
    Closer closer_ = nullptr;
};

/// Turns HDF5's automatic error printing off for its lifetime and restores the previous handler.
/// Declare one first in every public entry point, so it outlives the handles closed on unwinding.
class QuietErrors {
public:
    QuietErrors() noexcept
    {
        H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    }
    ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
    QuietErrors(const QuietErrors&) = delete;
    QuietErrors& operator=(const QuietErrors&) = delete;

private:
    H5E_auto2_t func_ = nullptr;
    void* data_ = nullptr;
};

namespace detail {

/// "<where>: <function> failed: <HDF5's messages>", clearing HDF5's error stack. `call` is the
/// call's source text; only the function name is kept.
std::string hdf5_error_message(std::string_view call, const std::string& where);

/// Throws halo::Hdf5Error with hdf5_error_message(call, where).
[[noreturn]] void throw_hdf5_error(std::string_view call, const std::string& where,
                                   const char* file, int line);

template <typename T, typename WhereFn>
T check_hdf5(T result, std::string_view call, WhereFn&& where, const char* file, int line)
{
    if (result < 0) {
        throw_hdf5_error(call, where(), file, line);
    }
    return result;
}

}  // namespace detail

/// Maps a C++ element type to its HDF5 file type (little-endian, fixed size) and memory type.
template <typename T>
struct H5Type;
template <>
struct H5Type<std::int8_t> {
    static hid_t file() { return H5T_STD_I8LE; }
    static hid_t memory() { return H5T_NATIVE_INT8; }
    static constexpr const char* name = "int8";
};
template <>
struct H5Type<std::int32_t> {
    static hid_t file() { return H5T_STD_I32LE; }
    static hid_t memory() { return H5T_NATIVE_INT32; }
    static constexpr const char* name = "int32";
};
template <>
struct H5Type<std::int64_t> {
    static hid_t file() { return H5T_STD_I64LE; }
    static hid_t memory() { return H5T_NATIVE_INT64; }
    static constexpr const char* name = "int64";
};
template <>
struct H5Type<float> {
    static hid_t file() { return H5T_IEEE_F32LE; }
    static hid_t memory() { return H5T_NATIVE_FLOAT; }
    static constexpr const char* name = "float32";
};

namespace detail {

/// "int32", "uint8", "float64", "string", ...: a stored type as error messages name it.
std::string describe_type(hid_t type);

}  // namespace detail

/// An opened dataset (open_dataset, hdf5_util.hpp) and its dimensions.
struct OpenDataset {
    Handle dataset;
    std::vector<hsize_t> dims;
};

/// Told, in row order, of rows [first_row, first_row + count) of a dataset being read once they
/// are in place (at `rows`) and verified.
using RowsRead =
    std::function<void(std::uint64_t first_row, std::uint64_t count, const void* rows)>;

/// Rows of a dataset produced while it is written (a download from a device, say):
/// source(first_row, count) returns rows [first_row, first_row + count), row-major in the memory
/// type, which must stay readable until the call after next (the writer prepares one batch
/// while it fetches the next). Called on one thread at a time, in row order, batch by batch,
/// while the batch before is written: the first batch on the calling thread, the others on an
/// OpenMP worker. It may throw; the write then fails with its exception.
using RowSource = std::function<const void*(std::uint64_t first_row, std::uint64_t count)>;

}  // namespace halo::store

/// Checks an HDF5 call's result (a negative hid_t, herr_t or htri_t is a failure) and returns it;
/// on failure throws halo::Hdf5Error naming the call, the object (the streamed remaining
/// arguments, evaluated only then) and HDF5's own messages:
///     Handle f(HALO_HDF5_TRY(H5Fopen(name, H5F_ACC_RDONLY, fapl), name), H5Fclose);
#define HALO_HDF5_TRY(call, ...)       \
    ::halo::store::detail::check_hdf5( \
        (call), #call, [&] { return ::halo::detail::concat(__VA_ARGS__); }, __FILE__, __LINE__)
