// Kernel metadata in the dataset (docs/FORMAT.md, "Kernel metadata"): the groups
// /parts/<p>/kernels/<kernel>/<operator>, written with the dataset (DatasetWriter) or added to a
// committed dataset in place (store_kernel_metadata), and read back with every array checked for
// its element type.
#include "kernel_metadata_io.hpp"

#include <hdf5.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <optional>
#include <string>

#include "dataset_reader.hpp"
#include "halo/core/error.hpp"
#include "halo/core/kernel_metadata.hpp"
#include "halo/store/store.hpp"
#include "hdf5_util.hpp"

namespace halo::store {
namespace {

// Attributes every metadata group carries; the kernel's own attributes may not use these names.
constexpr const char* reserved_attributes[] = {"kernel", "operator", "fingerprint", "rows",
                                               "cols",   "nnz"};
// Temporary groups of an in-place update start with this prefix; readers skip them (one can
// survive a crash between creating and renaming it).
constexpr std::string_view temp_prefix = "tmp_";

bool is_reserved(const std::string& name)
{
    for (const auto* r : reserved_attributes) {
        if (name == r) {
            return true;
        }
    }
    return false;
}

std::string fingerprint_text(std::uint64_t fingerprint)
{
    char text[17];
    std::snprintf(text, sizeof text, "%016" PRIx64, fingerprint);
    return text;
}

std::uint64_t parse_fingerprint(const std::string& text, const Where& where)
{
    std::uint64_t value = 0;
    bool ok = text.size() == 16;
    for (const char c : text) {
        int digit = -1;
        if (c >= '0' && c <= '9') {
            digit = c - '0';
        } else if (c >= 'a' && c <= 'f') {
            digit = c - 'a' + 10;
        }
        ok = ok && digit >= 0;
        value = value * 16 + static_cast<std::uint64_t>(digit < 0 ? 0 : digit);
    }
    if (!ok) {
        HALO_THROW(InputError, where.str(), ": attribute fingerprint: '", text,
                   "' is not 16 lowercase hexadecimal digits");
    }
    return value;
}

void write_group_contents(hid_t g, const Where& w, const KernelMetadata& md)
{
    write_attribute_string(g, w, "kernel", md.kernel);
    write_attribute_string(g, w, "operator", md.op);
    write_attribute_string(g, w, "fingerprint", fingerprint_text(md.fingerprint));
    write_attribute<std::int64_t>(g, w, "rows", md.rows);
    write_attribute<std::int64_t>(g, w, "cols", md.cols);
    write_attribute<std::int64_t>(g, w, "nnz", md.nnz);
    for (const auto& [name, value] : md.ints) {
        write_attribute<std::int64_t>(g, w, name.c_str(), value);
    }
    for (const auto& [name, value] : md.reals) {
        write_scalar_attribute(g, w, name.c_str(), H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
    }
    for (const auto& [name, value] : md.strings) {
        write_attribute_string(g, w, name.c_str(), value);
    }
    for (const auto& [name, values] : md.int32_arrays) {
        write_array<std::int32_t>(g, w, name.c_str(), {values.data(), values.size()});
    }
    for (const auto& [name, values] : md.int64_arrays) {
        write_array<std::int64_t>(g, w, name.c_str(), {values.data(), values.size()});
    }
    for (const auto& [name, values] : md.float_arrays) {
        write_array<float>(g, w, name.c_str(), {values.data(), values.size()});
    }
}

struct AttributeNames {
    std::vector<std::string> names;
};

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* data)
{
    static_cast<AttributeNames*>(data)->names.emplace_back(name);
    return 0;
}

// The class and size of a stored element type.
struct StoredType {
    H5T_class_t cls = H5T_NO_CLASS;
    std::size_t size = 0;
    bool is_signed = true;
};

StoredType attribute_type(hid_t loc, const Where& w, const std::string& name)
{
    const auto where = w.str() + " attribute " + name;
    const Handle attr(HALO_HDF5_TRY(H5Aopen(loc, name.c_str(), H5P_DEFAULT), where), H5Aclose);
    const Handle type(HALO_HDF5_TRY(H5Aget_type(attr.get()), where), H5Tclose);
    return {H5Tget_class(type.get()), H5Tget_size(type.get()),
            H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_sign(type.get()) == H5T_SGN_2};
}

StoredType dataset_type(hid_t loc, const Where& w)
{
    const auto name = w.path.substr(w.path.rfind('/') + 1);
    const Handle ds(HALO_HDF5_TRY(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), w.str()), H5Dclose);
    const Handle type(HALO_HDF5_TRY(H5Dget_type(ds.get()), w.str()), H5Tclose);
    return {H5Tget_class(type.get()), H5Tget_size(type.get()),
            H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_sign(type.get()) == H5T_SGN_2};
}

void check_names(const KernelMetadata& md)
{
    validate_metadata_name(md.kernel, "kernel");
    validate_metadata_name(md.op, "operator");
    if (md.op.rfind(temp_prefix, 0) == 0) {
        HALO_THROW(LogicError, "kernel metadata ", md.kernel, ": operator name '", md.op,
                   "' starts with the temporary prefix ", temp_prefix);
    }
    auto check = [&](const std::string& name) {
        validate_metadata_name(name, "kernel metadata member");
        if (is_reserved(name)) {
            HALO_THROW(LogicError, "kernel metadata ", md.kernel, ": member name '", name,
                       "' is reserved");
        }
    };
    auto check_members = [&](const auto& members) {
        for (const auto& [name, v] : members) {
            check(name);
        }
    };
    check_members(md.ints);
    check_members(md.reals);
    check_members(md.strings);
    check_members(md.int32_arrays);
    check_members(md.int64_arrays);
    check_members(md.float_arrays);
}

Handle open_or_create_group(hid_t loc, const Where& w, const char* name)
{
    return has_link(loc, w, name) ? open_group(loc, w, name) : create_group(loc, w, name);
}

}  // namespace

void write_kernel_metadata_group(hid_t part_group, const Where& part_where,
                                 const KernelMetadata& md)
{
    check_names(md);
    const auto kernels = open_or_create_group(part_group, part_where, "kernels");
    const auto kw = part_where.child("kernels");
    const auto kernel = open_or_create_group(kernels.get(), kw, md.kernel.c_str());
    const auto kkw = kw.child(md.kernel);
    // Written under a temporary name, then moved over the old group (if any): an interrupted
    // update leaves the old metadata or none, never half of the new one under the real name.
    const auto temp = std::string(temp_prefix) + md.op + "_" + std::to_string(::getpid());
    if (has_link(kernel.get(), kkw, temp.c_str())) {
        HALO_HDF5_TRY(H5Ldelete(kernel.get(), temp.c_str(), H5P_DEFAULT), kkw.child(temp).str());
    }
    {
        const auto group = create_group(kernel.get(), kkw, temp.c_str());
        write_group_contents(group.get(), kkw.child(temp), md);
    }
    if (has_link(kernel.get(), kkw, md.op.c_str())) {
        HALO_HDF5_TRY(H5Ldelete(kernel.get(), md.op.c_str(), H5P_DEFAULT), kkw.child(md.op).str());
    }
    HALO_HDF5_TRY(H5Lmove(kernel.get(), temp.c_str(), kernel.get(), md.op.c_str(), H5P_DEFAULT,
                          H5P_DEFAULT),
                  kkw.child(md.op).str());
}

std::optional<KernelMetadata> read_kernel_metadata_group(hid_t part_group, const Where& part_where,
                                                         const std::string& kernel,
                                                         const std::string& op)
{
    validate_metadata_name(kernel, "kernel");
    validate_metadata_name(op, "operator");
    if (!has_link(part_group, part_where, "kernels")) {
        return std::nullopt;
    }
    const auto kernels = open_group(part_group, part_where, "kernels");
    const auto kw = part_where.child("kernels");
    if (!has_link(kernels.get(), kw, kernel.c_str())) {
        return std::nullopt;
    }
    const auto kg = open_group(kernels.get(), kw, kernel.c_str());
    const auto kkw = kw.child(kernel);
    if (!has_link(kg.get(), kkw, op.c_str())) {
        return std::nullopt;
    }
    const auto group = open_group(kg.get(), kkw, op.c_str());
    const auto w = kkw.child(op);
    const auto g = group.get();

    KernelMetadata md;
    md.origin = w.str();
    md.kernel = read_string_attribute(g, w, "kernel");
    md.op = read_string_attribute(g, w, "operator");
    if (md.kernel != kernel || md.op != op) {
        HALO_THROW(InputError, w.str(), ": attributes say kernel '", md.kernel, "', operator '",
                   md.op, "' but the group is ", kernel, "/", op);
    }
    md.fingerprint = parse_fingerprint(read_string_attribute(g, w, "fingerprint"), w);
    md.rows = read_int_attribute(g, w, "rows");
    md.cols = read_int_attribute(g, w, "cols");
    md.nnz = read_int_attribute(g, w, "nnz");
    if (md.rows < 0 || md.cols < 0 || md.nnz < 0) {
        HALO_THROW(InputError, w.str(), ": negative shape (rows ", md.rows, ", cols ", md.cols,
                   ", nnz ", md.nnz, ")");
    }

    AttributeNames attributes;
    hsize_t index = 0;
    HALO_HDF5_TRY(H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, &index, collect_attribute,
                              &attributes),
                  w.str());
    for (const auto& name : attributes.names) {
        if (is_reserved(name)) {
            continue;
        }
        const auto t = attribute_type(g, w, name);
        if (t.cls == H5T_INTEGER) {
            md.ints[name] = read_int_attribute(g, w, name.c_str());
        } else if (t.cls == H5T_FLOAT) {
            md.reals[name] = read_float_attribute(g, w, name.c_str());
        } else if (t.cls == H5T_STRING) {
            md.strings[name] = read_string_attribute(g, w, name.c_str());
        } else {
            HALO_THROW(InputError, w.str(), ": attribute ", name,
                       " is neither an integer, a float nor a string");
        }
    }
    constexpr std::int64_t any_length = std::int64_t{1} << 40;
    for (const auto& name : link_names(g, w)) {
        const auto dw = w.child(name);
        const auto t = dataset_type(g, dw);
        if (t.cls == H5T_INTEGER && t.size <= 4 && t.is_signed) {
            md.int32_arrays[name] =
                read_array<std::int32_t>(g, w, name.c_str(), {any_length, "any length", false});
        } else if (t.cls == H5T_INTEGER && t.size == 8 && t.is_signed) {
            md.int64_arrays[name] =
                read_array<std::int64_t>(g, w, name.c_str(), {any_length, "any length", false});
        } else if (t.cls == H5T_FLOAT && t.size == 4) {
            md.float_arrays[name] =
                read_array<float>(g, w, name.c_str(), {any_length, "any length", false});
        } else {
            HALO_THROW(InputError, dw.str(),
                       ": kernel metadata arrays are int32, int64 or float32; this one is not");
        }
    }
    return md;
}

std::vector<std::string> list_kernel_metadata_groups(hid_t part_group, const Where& part_where)
{
    std::vector<std::string> out;
    if (!has_link(part_group, part_where, "kernels")) {
        return out;
    }
    const auto kernels = open_group(part_group, part_where, "kernels");
    const auto kw = part_where.child("kernels");
    for (const auto& kernel : link_names(kernels.get(), kw)) {
        const auto kg = open_group(kernels.get(), kw, kernel.c_str());
        for (const auto& op : link_names(kg.get(), kw.child(kernel))) {
            if (op.rfind(temp_prefix, 0) != 0) {
                out.push_back(kernel + "/" + op);
            }
        }
    }
    return out;
}

}  // namespace halo::store

namespace halo {
namespace {

// Opens part `part` of a committed dataset after checking the root (DatasetReader), with the
// file access the caller needs.
struct OpenPart {
    store::Handle file;
    store::Handle group;
    store::Where where;
};

OpenPart open_part(const std::filesystem::path& path, int part, bool writable)
{
    std::int32_t num_parts = 0;
    {
        const store::DatasetReader reader(path);  // format, version and root checks
        num_parts = reader.info().num_parts;
    }
    const auto file = path.string();
    if (part < 0 || part >= num_parts) {
        HALO_THROW(InputError, file, ": part ", part, " does not exist (the dataset has ",
                   num_parts, " parts)");
    }
    OpenPart out;
    if (writable) {
        out.file = store::Handle(
            HALO_HDF5_TRY(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), file,
                          ": cannot open for writing (read-only, or open in another process?)"),
            H5Fclose);
    } else {
        out.file = store::open_file_read_only(file);
    }
    const store::Where root{file, "/"};
    const auto parts = store::open_group(out.file.get(), root, "parts");
    const auto name = std::to_string(part);
    out.where = root.child("parts").child(name);
    out.group = store::open_group(parts.get(), root.child("parts"), name.c_str());
    return out;
}

}  // namespace

void store_kernel_metadata(const std::filesystem::path& path, int part, const KernelMetadata& md)
{
    const store::QuietErrors quiet;
    auto p = open_part(path, part, true);
    store::write_kernel_metadata_group(p.group.get(), p.where, md);
    p.group.reset();
    HALO_HDF5_TRY(H5Fflush(p.file.get(), H5F_SCOPE_GLOBAL), path.string());
    HALO_HDF5_TRY(p.file.close(), path.string(), ": closing after the update");
}

std::optional<KernelMetadata> read_kernel_metadata(const std::filesystem::path& path, int part,
                                                   const std::string& kernel,
                                                   const std::string& op)
{
    const store::QuietErrors quiet;
    const auto p = open_part(path, part, false);
    return store::read_kernel_metadata_group(p.group.get(), p.where, kernel, op);
}

std::vector<std::string> list_kernel_metadata(const std::filesystem::path& path, int part)
{
    const store::QuietErrors quiet;
    const auto p = open_part(path, part, false);
    return store::list_kernel_metadata_groups(p.group.get(), p.where);
}

}  // namespace halo
