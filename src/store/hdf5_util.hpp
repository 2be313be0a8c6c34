// Private helpers of the HDF5 store: typed dataset and attribute I/O that check what they read
// (type, rank, shape) before trusting it, over the handles and the HALO_HDF5_TRY check of
// hdf5_handle.hpp and the parallel chunk I/O of chunk_io.hpp.
//
// Every helper names the object it works on as "<file>: <path in the file>" (a Where) at the head
// of its errors, so that a user can find the offending dataset with h5ls. HDF5's own error
// printing is switched off around every public store call (QuietErrors): a failure becomes one
// exception holding HDF5's message, not a stack dump on stderr.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "chunk_io.hpp"
#include "halo/core/detail/resident_memory.hpp"
#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "hdf5_handle.hpp"

namespace halo::store {

/// Datasets up to this many bytes are stored contiguous; larger ones chunked with a Fletcher32
/// checksum per chunk (docs/FORMAT.md, "Storage"). Small datasets gain nothing from chunking but
/// its index overhead.
inline constexpr std::size_t contiguous_limit_bytes = 64 * 1024;
/// Size of one chunk: about 1 MiB (HDF5's default chunk cache holds that much, so such a chunk
/// is read once however it is accessed) for datasets up to 1 GiB; beyond, the power of two that
/// keeps a dataset at about 1024 chunks, up to 64 MiB. HDF5 1.10 finds a chunk's address
/// (H5Dget_chunk_info_by_coord) by walking the whole chunk index, so the parallel reader's lookup
/// of every chunk costs time in the square of their number: 16000 chunks took 4.6 s on the dev
/// VM, 1000 took 18 ms.
inline constexpr std::size_t chunk_min_bytes = std::size_t{1} << 20;
inline constexpr std::size_t chunk_max_bytes = std::size_t{64} << 20;
inline constexpr std::size_t chunks_per_dataset = 1024;

/// Rows a chunk of a dataset of `rows` rows of `row_bytes` holds under the policy above (at
/// least one row, at most all of them).
std::uint64_t chunk_rows_for(std::uint64_t rows, std::uint64_t row_bytes);

// ---- files and groups ----------------------------------------------------------------------

/// Opens an existing file read-only (so that many processes may read it at once). A missing file
/// is a halo::IoError, a file without the HDF5 signature a halo::InputError, a file HDF5 cannot
/// open (truncated, damaged) a halo::Hdf5Error.
Handle open_file_read_only(const std::string& file);

/// A HaloGNN file opened read-only (open_file_read_only), its root group as errors name it and
/// its root attribute "format" ("" where it has none: another file, or an interrupted write).
struct FormatFile {
    Handle file;
    Where root;
    std::string format;
};

FormatFile open_format_file(const std::string& file);

/// Throws halo::InputError "<file>: <kind> format version <v>, this build reads version
/// <version>" unless the root attribute "version" of `in` is `version`.
void expect_format_version(const FormatFile& in, std::string_view kind, std::int64_t version);

/// Creates (truncating) a file for writing.
Handle create_file(const std::string& file, const std::string& name_in_errors);

/// Whether AtomicH5File::commit flushes the file to stable storage before publishing it.
enum class Durability {
    /// fsync, rename, fsync the directory: the file survives a power loss once commit returns.
    synced,
    /// rename only: the file is complete for every process at once, but a power loss or kernel
    /// crash may lose or damage data not yet written back (docs/FORMAT.md, "Results").
    unsynced,
};

/// An HDF5 file written under a temporary name ("<target>.tmp-<pid>") and renamed into place by
/// commit() after a flush to stable storage; destroyed uncommitted, it removes the temporary file.
/// So a crash never leaves a file at the target path that looks complete. A synced file starts
/// the write-back of what is written while it is written (a helper thread asks for it every 50
/// ms, sync_file_range), so that the disk works during the writes and commit's fsync waits only
/// for the rest: the disk's time instead of the writes' time plus the disk's.
class AtomicH5File {
public:
    explicit AtomicH5File(const std::filesystem::path& target,
                          Durability durability = Durability::synced);
    ~AtomicH5File();
    AtomicH5File(const AtomicH5File&) = delete;
    AtomicH5File& operator=(const AtomicH5File&) = delete;

    hid_t get() const noexcept { return handle_.get(); }
    /// The target's name, which errors show.
    const std::string& name() const noexcept { return name_; }
    const std::filesystem::path& temp_path() const noexcept { return temp_; }
    bool committed() const noexcept { return committed_; }

    /// Closes (every object opened in the file must be closed first), syncs and renames.
    void commit();
    /// Writes the root attribute "format" last, so that a file without it is an interrupted
    /// write to every reader, then commits.
    void commit_as(const std::string& format);

private:
    class Writeback;

    std::filesystem::path target_;
    std::filesystem::path temp_;
    std::string name_;
    Durability durability_;
    Handle handle_;
    std::unique_ptr<Writeback> writeback_;
    bool committed_ = false;
};

/// Whether `loc` has a link called `name` (one path component).
bool has_link(hid_t loc, const Where& loc_where, const char* name);

/// Opens group `name` of `loc`; a missing one is a halo::InputError.
Handle open_group(hid_t loc, const Where& loc_where, const char* name);

Handle create_group(hid_t loc, const Where& loc_where, const char* name);

/// Names of the links of a group, in name order.
std::vector<std::string> link_names(hid_t group, const Where& where);

/// Whether links a and b of `loc` name the same object (hard links to one dataset).
bool same_object(hid_t loc, const Where& loc_where, const char* a, const char* b);

// ---- datasets ------------------------------------------------------------------------------

/// Writes a dataset of `dims` (rank 1 or 2) from `data`, contiguous when small, chunked with a
/// Fletcher32 checksum when larger than contiguous_limit_bytes. Zero-length datasets are fine.
void write_dataset(hid_t loc, const Where& loc_where, const char* name, hid_t file_type,
                   hid_t memory_type, std::size_t element_size, const void* data,
                   std::span<const hsize_t> dims);

/// write_dataset with the rows from `source`, in batches of about 64 MiB.
void write_dataset_rows(hid_t loc, const Where& loc_where, const char* name, hid_t file_type,
                        hid_t memory_type, std::size_t element_size, std::span<const hsize_t> dims,
                        const RowSource& source);

template <typename T>
void write_array(hid_t loc, const Where& loc_where, const char* name, std::span<const T> data)
{
    const hsize_t dims[1] = {static_cast<hsize_t>(data.size())};
    write_dataset(loc, loc_where, name, H5Type<T>::file(), H5Type<T>::memory(), sizeof(T),
                  data.data(), dims);
}

template <typename T>
void write_matrix(hid_t loc, const Where& loc_where, const char* name, std::span<const T> data,
                  std::int64_t rows, std::int64_t cols)
{
    const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
    write_dataset(loc, loc_where, name, H5Type<T>::file(), H5Type<T>::memory(), sizeof(T),
                  data.data(), dims);
}

/// What a reader expects of an element type: its class and the most bytes it accepts. Integers
/// and floats may be stored narrower than the memory type (HDF5 widens them exactly) but never
/// wider, and never as unsigned of the same width, since those conversions can lose values.
enum class ElementClass { integer, floating };

/// Opens dataset `name` of `loc` and checks its element type and rank; returns its dimensions.
/// A missing dataset, a wrong type or rank is a halo::InputError naming the dataset.
OpenDataset open_dataset(hid_t loc, const Where& loc_where, const char* name, ElementClass cls,
                         std::size_t element_size, const char* type_name, int rank);

/// Checks an opened dataset's declared shape before anything is allocated for it: an uncompressed
/// dataset must store every element it declares (`stored_size` bytes each), and the memory to read
/// it (`memory_size` bytes each) must be available (halo/core/memory_limits.hpp). open_dataset
/// calls it, so a dataset declaring 10^12 rows is a halo::InputError naming it, never an OOM kill.
void check_dataset_size(const OpenDataset& ds, const std::string& where, std::size_t stored_size,
                        std::size_t memory_size);

/// Reads the whole of an opened dataset into `out` (which has its element count); tells
/// `on_rows`, if given, of the rows as they arrive (all at once where HDF5 reads them).
void read_into(const OpenDataset& ds, const Where& where, hid_t memory_type, void* out,
               const RowsRead& on_rows = {});

/// A vector of `count` zero elements whose pages were made resident on every core first
/// (detail::resident_vector; not under HALO_SERIAL_IO), so that its zero-filling and the reads
/// into it run at memory speed.

template <typename T>
std::vector<T> resident_vector(std::size_t count)
{
    return halo::detail::resident_vector<T>(count, parallel_io_enabled());
}

/// How long a 1-D dataset must be: exactly (or, with exact = false, at most) `count` elements;
/// `why` says where the bound comes from, for the error message.
struct Length {
    std::int64_t count = 0;
    const char* why = "";
    bool exact = true;
};

/// Reads a 1-D dataset after checking its length ("<where>: 40 elements, expected 41 (attribute
/// nnz)"), before allocating anything: a damaged length fails here, not in the allocator.
template <typename T>
std::vector<T> read_array(hid_t loc, const Where& loc_where, const char* name, Length length)
{
    constexpr auto cls =
        std::is_floating_point_v<T> ? ElementClass::floating : ElementClass::integer;
    const auto where = loc_where.child(name);
    const auto ds = open_dataset(loc, loc_where, name, cls, sizeof(T), H5Type<T>::name, 1);
    const auto n = static_cast<std::int64_t>(ds.dims[0]);
    if (length.exact ? n != length.count : n > length.count) {
        HALO_THROW(InputError, where.str(), ": ", n, " elements, expected ",
                   length.exact ? "" : "at most ", length.count, " (", length.why, ")");
    }
    auto out = resident_vector<T>(static_cast<std::size_t>(n));
    read_into(ds, where, H5Type<T>::memory(), out.data());
    return out;
}

/// Reads a 2-D dataset of exactly rows x cols into a row-major vector (telling `on_rows` of the
/// rows as they arrive, as read_into does).
template <typename T>
std::vector<T> read_matrix(hid_t loc, const Where& loc_where, const char* name, std::int64_t rows,
                           std::int64_t cols, const char* expected_what,
                           const RowsRead& on_rows = {})
{
    constexpr auto cls =
        std::is_floating_point_v<T> ? ElementClass::floating : ElementClass::integer;
    const auto where = loc_where.child(name);
    const auto ds = open_dataset(loc, loc_where, name, cls, sizeof(T), H5Type<T>::name, 2);
    if (static_cast<std::int64_t>(ds.dims[0]) != rows ||
        static_cast<std::int64_t>(ds.dims[1]) != cols) {
        HALO_THROW(InputError, where.str(), ": shape [", ds.dims[0], ", ", ds.dims[1],
                   "], expected [", rows, ", ", cols, "] (", expected_what, ")");
    }
    auto out = resident_vector<T>(static_cast<std::size_t>(rows * cols));
    read_into(ds, where, H5Type<T>::memory(), out.data(), on_rows);
    return out;
}

/// The HDF5 type of stored 16-bit features (docs/FORMAT.md), both little-endian floating-point
/// types that any HDF5 reader widens exactly: fp16 is IEEE binary16 (h5py reads it as numpy's
/// float16), bf16 is bfloat16 (sign, 8-bit exponent with bias 127, 7-bit significand: fp32's
/// upper half). Used as file and memory type alike, so the bits move unconverted.
Handle float16_type(FeatureType type, const std::string& where);

/// write_matrix for 16-bit features: `bits` (rows x cols, encode_features) as float16_type(type).
void write_matrix16(hid_t loc, const Where& loc_where, const char* name, FeatureType type,
                    std::span<const std::uint16_t> bits, std::int64_t rows, std::int64_t cols);

/// read_matrix for 16-bit features: the bit patterns of a rows x cols dataset stored exactly as
/// float16_type(type); any other type (fp32, the other 16-bit layout, an integer) is a
/// halo::InputError naming the dataset, what it holds and what was expected.
std::vector<std::uint16_t> read_matrix16(hid_t loc, const Where& loc_where, const char* name,
                                         FeatureType type, std::int64_t rows, std::int64_t cols,
                                         const char* expected_what,
                                         const RowsRead& on_rows = {});

// ---- attributes ----------------------------------------------------------------------------

/// Scalar attribute of `file_type`, from one value of `memory_type` at `value`.
void write_scalar_attribute(hid_t loc, const Where& loc_where, const char* name, hid_t file_type,
                            hid_t memory_type, const void* value);

template <typename T>
void write_attribute(hid_t loc, const Where& loc_where, const char* name, T value)
{
    write_scalar_attribute(loc, loc_where, name, H5Type<T>::file(), H5Type<T>::memory(), &value);
}

/// 1-D int64 attribute (e.g. the csr group's shape).
void write_attribute_array(hid_t loc, const Where& loc_where, const char* name,
                           std::span<const std::int64_t> values);

/// Scalar fixed-length UTF-8 string attribute, NUL-padded, of max(1, value.size()) bytes (h5py
/// reads it as bytes). Not variable-length: those live in the global heap (hdf5_guard.hpp).
void write_attribute_string(hid_t loc, const Where& loc_where, const char* name,
                            const std::string& value);

bool has_attribute(hid_t loc, const Where& loc_where, const char* name);

/// Reads a scalar integer attribute of any integer type. Missing or non-integer: InputError.
std::int64_t read_int_attribute(hid_t loc, const Where& loc_where, const char* name);

/// Reads a 1-D integer attribute of `count` values.
std::vector<std::int64_t> read_int_array_attribute(hid_t loc, const Where& loc_where,
                                                   const char* name, std::size_t count);

/// Reads a scalar integer or floating-point attribute as double.
double read_float_attribute(hid_t loc, const Where& loc_where, const char* name);

/// Reads a scalar string attribute, fixed- or variable-length, ASCII or UTF-8; a variable-length
/// one (older files) in a child process (read_variable_string_guarded).
std::string read_string_attribute(hid_t loc, const Where& loc_where, const char* name);

}  // namespace halo::store
