// The attribute half of hdf5_util.hpp: scalar, array and string attributes, each read checked
// for its type and size.
#include <cstdint>
#include <string>
#include <vector>

#include "hdf5_guard.hpp"
#include "hdf5_util.hpp"

namespace halo::store {

namespace {

std::string attribute_where(const Where& loc_where, const char* name)
{
    return loc_where.str() + ": attribute " + name;
}

Handle open_attribute(hid_t loc, const Where& loc_where, const char* name)
{
    const auto where = attribute_where(loc_where, name);
    if (!has_attribute(loc, loc_where, name)) {
        HALO_THROW(InputError, where, ": missing");
    }
    return Handle(HALO_HDF5_TRY(H5Aopen(loc, name, H5P_DEFAULT), where), H5Aclose);
}

hssize_t attribute_points(hid_t attr, const std::string& where)
{
    const Handle space(HALO_HDF5_TRY(H5Aget_space(attr), where), H5Sclose);
    return HALO_HDF5_TRY(H5Sget_simple_extent_npoints(space.get()), where);
}

std::vector<std::int64_t> read_int_values(hid_t loc, const Where& loc_where, const char* name,
                                          std::size_t count)
{
    const auto where = attribute_where(loc_where, name);
    const auto attr = open_attribute(loc, loc_where, name);
    const Handle type(HALO_HDF5_TRY(H5Aget_type(attr.get()), where), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_INTEGER) {
        HALO_THROW(InputError, where, ": stored as ", detail::describe_type(type.get()),
                   ", expected an integer");
    }
    const auto points = attribute_points(attr.get(), where);
    if (points != static_cast<hssize_t>(count)) {
        HALO_THROW(InputError, where, ": holds ", points, " values, expected ", count);
    }
    std::vector<std::int64_t> values(count);
    HALO_HDF5_TRY(H5Aread(attr.get(), H5T_NATIVE_INT64, values.data()), where);
    return values;
}

}  // namespace

// ---- attributes ----------------------------------------------------------------------------

void write_scalar_attribute(hid_t loc, const Where& loc_where, const char* name, hid_t file_type,
                            hid_t memory_type, const void* value)
{
    const auto where = attribute_where(loc_where, name);
    const Handle space(HALO_HDF5_TRY(H5Screate(H5S_SCALAR), where), H5Sclose);
    const Handle attr(
        HALO_HDF5_TRY(H5Acreate2(loc, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                      where),
        H5Aclose);
    HALO_HDF5_TRY(H5Awrite(attr.get(), memory_type, value), where);
}

void write_attribute_array(hid_t loc, const Where& loc_where, const char* name,
                           std::span<const std::int64_t> values)
{
    const auto where = attribute_where(loc_where, name);
    const hsize_t dims[1] = {static_cast<hsize_t>(values.size())};
    const Handle space(HALO_HDF5_TRY(H5Screate_simple(1, dims, nullptr), where), H5Sclose);
    const Handle attr(
        HALO_HDF5_TRY(H5Acreate2(loc, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                      where),
        H5Aclose);
    HALO_HDF5_TRY(H5Awrite(attr.get(), H5T_NATIVE_INT64, values.data()), where);
}

void write_attribute_string(hid_t loc, const Where& loc_where, const char* name,
                            const std::string& value)
{
    const auto where = attribute_where(loc_where, name);
    // Fixed-length: a variable-length string lives in the file's global heap, which HDF5 1.10.8
    // reads unchecked (docs/RELIABILITY.md, "Fuzzing"). HDF5 has no zero-length string type; the
    // NUL padding of an empty value is dropped on reading.
    std::string padded = value;
    padded.resize(std::max<std::size_t>(value.size(), 1), '\0');
    const Handle type(HALO_HDF5_TRY(H5Tcopy(H5T_C_S1), where), H5Tclose);
    HALO_HDF5_TRY(H5Tset_size(type.get(), padded.size()), where);
    HALO_HDF5_TRY(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), where);
    HALO_HDF5_TRY(H5Tset_cset(type.get(), H5T_CSET_UTF8), where);
    const Handle space(HALO_HDF5_TRY(H5Screate(H5S_SCALAR), where), H5Sclose);
    const Handle attr(
        HALO_HDF5_TRY(H5Acreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                      where),
        H5Aclose);
    HALO_HDF5_TRY(H5Awrite(attr.get(), type.get(), padded.data()), where);
}

bool has_attribute(hid_t loc, const Where& loc_where, const char* name)
{
    return HALO_HDF5_TRY(H5Aexists(loc, name), attribute_where(loc_where, name)) > 0;
}

std::int64_t read_int_attribute(hid_t loc, const Where& loc_where, const char* name)
{
    return read_int_values(loc, loc_where, name, 1).front();
}

std::vector<std::int64_t> read_int_array_attribute(hid_t loc, const Where& loc_where,
                                                   const char* name, std::size_t count)
{
    return read_int_values(loc, loc_where, name, count);
}

double read_float_attribute(hid_t loc, const Where& loc_where, const char* name)
{
    const auto where = attribute_where(loc_where, name);
    const auto attr = open_attribute(loc, loc_where, name);
    const Handle type(HALO_HDF5_TRY(H5Aget_type(attr.get()), where), H5Tclose);
    const auto cls = H5Tget_class(type.get());
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
        HALO_THROW(InputError, where, ": stored as ", detail::describe_type(type.get()),
                   ", expected a number");
    }
    const auto points = attribute_points(attr.get(), where);
    if (points != 1) {
        HALO_THROW(InputError, where, ": holds ", points, " values, expected 1");
    }
    double value = 0.0;
    HALO_HDF5_TRY(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value), where);
    return value;
}

std::string read_string_attribute(hid_t loc, const Where& loc_where, const char* name)
{
    const auto where = attribute_where(loc_where, name);
    const auto attr = open_attribute(loc, loc_where, name);
    const Handle type(HALO_HDF5_TRY(H5Aget_type(attr.get()), where), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_STRING) {
        HALO_THROW(InputError, where, ": stored as ", detail::describe_type(type.get()),
                   ", expected a string");
    }
    const auto points = attribute_points(attr.get(), where);
    if (points != 1) {
        HALO_THROW(InputError, where, ": holds ", points, " strings, expected 1");
    }
    if (HALO_HDF5_TRY(H5Tis_variable_str(type.get()), where) > 0) {
        // Older files: HDF5 may crash or hang on a corrupt global heap, so in a child process.
        return read_variable_string_guarded(attr.get(), type.get(), where);
    }
    std::string value(H5Tget_size(type.get()), '\0');
    HALO_HDF5_TRY(H5Aread(attr.get(), type.get(), value.data()), where);
    // Fixed-length strings are padded with NULs or spaces; the padding is not part of the value.
    value.resize(std::min(value.size(), value.find('\0')));
    if (H5Tget_strpad(type.get()) == H5T_STR_SPACEPAD) {
        value.erase(value.find_last_not_of(' ') + 1);
    }
    return value;
}

}  // namespace halo::store
