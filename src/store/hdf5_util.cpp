#include "hdf5_util.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "chunk_io.hpp"
#include "halo/core/memory_limits.hpp"

namespace halo::store {

// ---- files and groups ----------------------------------------------------------------------

Handle open_file_read_only(const std::string& file)
{
    std::error_code ec;
    const auto status = std::filesystem::status(file, ec);
    if (!std::filesystem::exists(status)) {
        HALO_THROW(IoError, file, ": no such file");
    }
    if (std::filesystem::is_directory(status)) {
        HALO_THROW(IoError, file, ": is a directory, not a dataset file");
    }
#if H5_VERSION_GE(1, 12, 0)
    const htri_t is_hdf5 = HALO_HDF5_TRY(H5Fis_accessible(file.c_str(), H5P_DEFAULT), file);
#else
    const htri_t is_hdf5 = HALO_HDF5_TRY(H5Fis_hdf5(file.c_str()), file);
#endif
    if (is_hdf5 == 0) {
        HALO_THROW(InputError, file,
                   ": not an HDF5 file (no HDF5 signature; is it empty, cut short, or another "
                   "format?)");
    }
    return Handle(HALO_HDF5_TRY(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), file,
                                ": cannot open as HDF5 (truncated or damaged?)"),
                  H5Fclose);
}

Handle create_file(const std::string& file, const std::string& name_in_errors)
{
    return Handle(HALO_HDF5_TRY(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                                name_in_errors, " (temporary file ", file, ")"),
                  H5Fclose);
}


FormatFile open_format_file(const std::string& file)
{
    FormatFile in{open_file_read_only(file), Where{file, "/"}, {}};
    if (has_attribute(in.file.get(), in.root, "format")) {
        in.format = read_string_attribute(in.file.get(), in.root, "format");
    }
    return in;
}

void expect_format_version(const FormatFile& in, std::string_view kind, std::int64_t version)
{
    const auto found = read_int_attribute(in.file.get(), in.root, "version");
    if (found != version) {
        HALO_THROW(InputError, in.root.file, ": ", kind, " format version ", found,
                   ", this build reads version ", version);
    }
}

bool has_link(hid_t loc, const Where& loc_where, const char* name)
{
    return HALO_HDF5_TRY(H5Lexists(loc, name, H5P_DEFAULT), loc_where.child(name).str()) > 0;
}

Handle open_group(hid_t loc, const Where& loc_where, const char* name)
{
    const auto where = loc_where.child(name).str();
    if (!has_link(loc, loc_where, name)) {
        HALO_THROW(InputError, where, ": missing group");
    }
    return Handle(HALO_HDF5_TRY(H5Gopen2(loc, name, H5P_DEFAULT), where), H5Gclose);
}

Handle create_group(hid_t loc, const Where& loc_where, const char* name)
{
    return Handle(HALO_HDF5_TRY(H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                loc_where.child(name).str()),
                  H5Gclose);
}

std::vector<std::string> link_names(hid_t group, const Where& where)
{
    H5G_info_t info{};
    HALO_HDF5_TRY(H5Gget_info(group, &info), where.str());
    std::vector<std::string> names;
    names.reserve(info.nlinks);
    for (hsize_t i = 0; i < info.nlinks; ++i) {
        const auto length = HALO_HDF5_TRY(
            H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT),
            where.str());
        std::string name(static_cast<std::size_t>(length) + 1, '\0');
        HALO_HDF5_TRY(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                                         name.size(), H5P_DEFAULT),
                      where.str());
        name.resize(static_cast<std::size_t>(length));
        names.push_back(std::move(name));
    }
    return names;
}

bool same_object(hid_t loc, const Where& loc_where, const char* a, const char* b)
{
    const auto where_a = loc_where.child(a).str();
    const auto where_b = loc_where.child(b).str();
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t info_a{};
    H5O_info2_t info_b{};
    HALO_HDF5_TRY(H5Oget_info_by_name3(loc, a, &info_a, H5O_INFO_BASIC, H5P_DEFAULT), where_a);
    HALO_HDF5_TRY(H5Oget_info_by_name3(loc, b, &info_b, H5O_INFO_BASIC, H5P_DEFAULT), where_b);
    int order = 0;
    HALO_HDF5_TRY(H5Otoken_cmp(loc, &info_a.token, &info_b.token, &order), where_a);
    return info_a.fileno == info_b.fileno && order == 0;
#else
    H5O_info_t info_a{};
    H5O_info_t info_b{};
    HALO_HDF5_TRY(H5Oget_info_by_name2(loc, a, &info_a, H5O_INFO_BASIC, H5P_DEFAULT), where_a);
    HALO_HDF5_TRY(H5Oget_info_by_name2(loc, b, &info_b, H5O_INFO_BASIC, H5P_DEFAULT), where_b);
    return info_a.fileno == info_b.fileno && info_a.addr == info_b.addr;
#endif
}

// ---- datasets ------------------------------------------------------------------------------

std::uint64_t chunk_rows_for(std::uint64_t rows, std::uint64_t row_bytes)
{
    const auto per_chunk = (rows * row_bytes + chunks_per_dataset - 1) / chunks_per_dataset;
    const auto target =
        std::clamp<std::uint64_t>(std::bit_ceil(per_chunk), chunk_min_bytes, chunk_max_bytes);
    return std::clamp<std::uint64_t>(target / row_bytes, 1, std::max<std::uint64_t>(rows, 1));
}

void write_dataset(hid_t loc, const Where& loc_where, const char* name, hid_t file_type,
                   hid_t memory_type, std::size_t element_size, const void* data,
                   std::span<const hsize_t> dims)
{
    const auto* bytes = static_cast<const unsigned char*>(data);
    const auto row_bytes = element_size * (dims.size() == 2 ? dims[1] : 1);
    write_dataset_rows(loc, loc_where, name, file_type, memory_type, element_size, dims,
                       [bytes, row_bytes](std::uint64_t first_row, std::uint64_t) {
                           return static_cast<const void*>(bytes + first_row * row_bytes);
                       });
}

void write_dataset_rows(hid_t loc, const Where& loc_where, const char* name, hid_t file_type,
                        hid_t memory_type, std::size_t element_size, std::span<const hsize_t> dims,
                        const RowSource& source)
{
    const auto where = loc_where.child(name).str();
    const int rank = static_cast<int>(dims.size());
    HALO_EXPECTS(rank == 1 || rank == 2, where, ": rank ", rank);
    hsize_t count = 1;
    for (const auto d : dims) {
        count *= d;
    }
    const Handle space(HALO_HDF5_TRY(H5Screate_simple(rank, dims.data(), nullptr), where),
                       H5Sclose);
    const Handle dcpl(HALO_HDF5_TRY(H5Pcreate(H5P_DATASET_CREATE), where), H5Pclose);
    const bool chunked = count * element_size > contiguous_limit_bytes;
    const hsize_t row_bytes = element_size * (rank == 2 ? dims[1] : 1);
    hsize_t chunk_rows = 0;
    if (chunked) {
        // A chunk holds whole rows, so that reading a row range touches the fewest chunks.
        std::vector<hsize_t> chunk(dims.begin(), dims.end());
        chunk_rows = chunk_rows_for(dims[0], row_bytes);
        chunk[0] = chunk_rows;
        HALO_HDF5_TRY(H5Pset_chunk(dcpl.get(), rank, chunk.data()), where);
        HALO_HDF5_TRY(H5Pset_fletcher32(dcpl.get()), where);
    }
    const Handle dataset(HALO_HDF5_TRY(H5Dcreate2(loc, name, file_type, space.get(), H5P_DEFAULT,
                                                  dcpl.get(), H5P_DEFAULT),
                                       where),
                         H5Dclose);
    // Chunks in the file's exact format are finished (checksummed) on every core and written
    // whole; anything HDF5 must convert goes through its pipeline, batch by batch.
    if (chunked && count * element_size >= parallel_min_bytes && parallel_io_enabled() &&
        HALO_HDF5_TRY(H5Tequal(file_type, memory_type), where) > 0) {
        write_chunks_parallel(dataset.get(), Where{loc_where.file, loc_where.child(name).path},
                              source, dims[0], row_bytes, chunk_rows);
        return;
    }
    if (count == 0) {
        return;
    }
    // Whole chunks a batch, so that HDF5 filters each chunk once.
    const hsize_t unit = chunked ? chunk_rows : 1;
    const hsize_t batch_rows = std::max<hsize_t>(write_batch_bytes / (row_bytes * unit), 1) * unit;
    for (hsize_t first = 0; first < dims[0]; first += batch_rows) {
        const hsize_t rows = std::min(batch_rows, dims[0] - first);
        const void* data = source(first, rows);
        if (rows == dims[0]) {
            HALO_HDF5_TRY(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                          where);
            continue;
        }
        hsize_t start[2] = {first, 0};
        hsize_t extent[2] = {rows, rank == 2 ? dims[1] : 1};
        const Handle file_space(HALO_HDF5_TRY(H5Dget_space(dataset.get()), where), H5Sclose);
        HALO_HDF5_TRY(
            H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, extent, nullptr),
            where);
        const Handle memory_space(HALO_HDF5_TRY(H5Screate_simple(rank, extent, nullptr), where),
                                  H5Sclose);
        HALO_HDF5_TRY(H5Dwrite(dataset.get(), memory_type, memory_space.get(), file_space.get(),
                               H5P_DEFAULT, data),
                      where);
    }
}

OpenDataset open_dataset(hid_t loc, const Where& loc_where, const char* name, ElementClass cls,
                         std::size_t element_size, const char* type_name, int rank)
{
    const auto where = loc_where.child(name).str();
    if (!has_link(loc, loc_where, name)) {
        HALO_THROW(InputError, where, ": missing dataset");
    }
    OpenDataset out;
    out.dataset = Handle(HALO_HDF5_TRY(H5Dopen2(loc, name, H5P_DEFAULT), where), H5Dclose);
    const Handle type(HALO_HDF5_TRY(H5Dget_type(out.dataset.get()), where), H5Tclose);
    const auto stored_class = H5Tget_class(type.get());
    const auto stored_size = H5Tget_size(type.get());
    // HDF5 converts on read; accept only conversions that cannot change a value.
    const bool ok = cls == ElementClass::integer
                        ? stored_class == H5T_INTEGER && stored_size <= element_size &&
                              (stored_size < element_size || H5Tget_sign(type.get()) == H5T_SGN_2)
                        : stored_class == H5T_FLOAT && stored_size <= element_size;
    if (!ok) {
        HALO_THROW(InputError, where, ": stored as ", detail::describe_type(type.get()), ", expected ",
                   type_name);
    }
    const Handle space(HALO_HDF5_TRY(H5Dget_space(out.dataset.get()), where), H5Sclose);
    const int ndims = HALO_HDF5_TRY(H5Sget_simple_extent_ndims(space.get()), where);
    if (ndims != rank) {
        HALO_THROW(InputError, where, ": has ", ndims, " dimensions, expected ", rank);
    }
    out.dims.resize(static_cast<std::size_t>(rank));
    HALO_HDF5_TRY(H5Sget_simple_extent_dims(space.get(), out.dims.data(), nullptr), where);
    check_dataset_size(out, where, stored_size, element_size);
    return out;
}

void check_dataset_size(const OpenDataset& ds, const std::string& where, std::size_t stored_size,
                        std::size_t memory_size)
{
    // In doubles: the product of dimensions read from a damaged file may exceed 2^64.
    double count = 1;
    std::string shape = "[";
    for (std::size_t k = 0; k < ds.dims.size(); ++k) {
        count *= static_cast<double>(ds.dims[k]);
        shape += (k > 0 ? ", " : "") + std::to_string(ds.dims[k]);
    }
    shape += "]";
    if (count == 0) {
        return;
    }
    // A chunked dataset may declare any shape and store nothing (unwritten chunks read as the fill
    // value); without compression every element the writers wrote takes its bytes in the file.
    const Handle plist(HALO_HDF5_TRY(H5Dget_create_plist(ds.dataset.get()), where), H5Pclose);
    const int filters = HALO_HDF5_TRY(H5Pget_nfilters(plist.get()), where);
    bool compressed = false;
    for (int k = 0; k < filters; ++k) {
        unsigned flags = 0;
        std::size_t values = 0;
        const auto filter = H5Pget_filter2(plist.get(), static_cast<unsigned>(k), &flags, &values,
                                           nullptr, 0, nullptr, nullptr);
        compressed = compressed || filter != H5Z_FILTER_FLETCHER32;
    }
    const double declared = count * static_cast<double>(stored_size);
    if (!compressed) {
        const auto stored = H5Dget_storage_size(ds.dataset.get());
        if (static_cast<double>(stored) < declared) {
            HALO_THROW(InputError, where, ": shape ", shape, " declares ", declared,
                       " bytes but the file stores ", stored,
                       " bytes for it (damaged, or written by something other than halo)");
        }
    }
    check_allocation(where, "shape " + shape, count * static_cast<double>(memory_size));
}

void read_into(const OpenDataset& ds, const Where& where, hid_t memory_type, void* out,
               const RowsRead& on_rows)
{
    hsize_t count = 1;
    for (const auto d : ds.dims) {
        count *= d;
    }
    if (count == 0) {
        return;  // HDF5 rejects a null buffer even for an empty selection
    }
    if (read_parallel(ds, where, memory_type, out, on_rows)) {
        return;
    }
    HALO_HDF5_TRY(H5Dread(ds.dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out),
                  where.str());
    if (on_rows) {
        on_rows(0, ds.dims[0], out);
    }
}

Handle float16_type(FeatureType type, const std::string& where)
{
    HALO_EXPECTS(type != FeatureType::fp32, where, ": float16_type of fp32");
    // Fields: sign bit, exponent position and size, significand position and size.
    const bool half = type == FeatureType::fp16;
    const std::size_t exponent_bits = half ? 5 : 8;
    const std::size_t significand_bits = half ? 10 : 7;
    Handle t(HALO_HDF5_TRY(H5Tcopy(H5T_IEEE_F32LE), where), H5Tclose);
    HALO_HDF5_TRY(H5Tset_fields(t.get(), 15, significand_bits, exponent_bits, 0, significand_bits),
                  where);
    HALO_HDF5_TRY(H5Tset_size(t.get(), 2), where);
    HALO_HDF5_TRY(H5Tset_precision(t.get(), 16), where);
    HALO_HDF5_TRY(H5Tset_ebias(t.get(), half ? 15 : 127), where);
    HALO_HDF5_TRY(H5Tset_norm(t.get(), H5T_NORM_IMPLIED), where);
    return t;
}

void write_matrix16(hid_t loc, const Where& loc_where, const char* name, FeatureType type,
                    std::span<const std::uint16_t> bits, std::int64_t rows, std::int64_t cols)
{
    const auto type16 = float16_type(type, loc_where.child(name).str());
    const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
    write_dataset(loc, loc_where, name, type16.get(), type16.get(), sizeof(std::uint16_t),
                  bits.data(), dims);
}

std::vector<std::uint16_t> read_matrix16(hid_t loc, const Where& loc_where, const char* name,
                                         FeatureType type, std::int64_t rows, std::int64_t cols,
                                         const char* expected_what, const RowsRead& on_rows)
{
    const auto where = loc_where.child(name);
    const auto expected = stored_feature_type_name(type);
    const auto ds = open_dataset(loc, loc_where, name, ElementClass::floating, 2,
                                 expected.c_str(), 2);
    const auto type16 = float16_type(type, where.str());
    const Handle stored(HALO_HDF5_TRY(H5Dget_type(ds.dataset.get()), where.str()), H5Tclose);
    if (HALO_HDF5_TRY(H5Tequal(stored.get(), type16.get()), where.str()) <= 0) {
        const auto other = type == FeatureType::fp16 ? FeatureType::bf16 : FeatureType::fp16;
        const auto other_type = float16_type(other, where.str());
        const bool is_other =
            HALO_HDF5_TRY(H5Tequal(stored.get(), other_type.get()), where.str()) > 0;
        HALO_THROW(InputError, where.str(), ": stored as ",
                   is_other ? stored_feature_type_name(other)
                            : "a 16-bit floating-point type of another layout",
                   ", expected ", expected, " (the root attribute feature_type)");
    }
    if (static_cast<std::int64_t>(ds.dims[0]) != rows ||
        static_cast<std::int64_t>(ds.dims[1]) != cols) {
        HALO_THROW(InputError, where.str(), ": shape [", ds.dims[0], ", ", ds.dims[1],
                   "], expected [", rows, ", ", cols, "] (", expected_what, ")");
    }
    auto out = resident_vector<std::uint16_t>(static_cast<std::size_t>(rows * cols));
    read_into(ds, where, type16.get(), out.data(), on_rows);
    return out;
}


}  // namespace halo::store
