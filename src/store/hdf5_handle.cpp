#include "hdf5_handle.hpp"

#include <string>
#include <vector>

namespace halo::store {

namespace {

// HDF5 1.10 crashes at exit (H5_term_library -> H5F__close_cb, a segfault) once an H5Fclose has
// failed, as it does when the disk fills while the file's metadata is flushed: a clean "No space
// left on device" error became exit status 139 (tests/apps/test_faults.sh). Its atexit clean-up
// is not needed: the store closes every object it opens, and the process is ending. H5dont_atexit
// must precede the library's initialization, hence a static initializer.
[[maybe_unused]] const herr_t hdf5_no_atexit = H5dont_atexit();

}  // namespace

namespace detail {

namespace {

herr_t collect_description(unsigned, const H5E_error2_t* error, void* data)
{
    auto* out = static_cast<std::vector<std::string>*>(data);
    if (error->desc != nullptr && error->desc[0] != '\0') {
        out->emplace_back(error->desc);
    }
    return 0;
}

}  // namespace

std::string hdf5_error_message(std::string_view call, const std::string& where)
{
    // Downward: the API call's own description first, then the innermost cause, which is the
    // one that says what is wrong with the file ("truncated file", "bad checksum").
    std::vector<std::string> descriptions;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_description, &descriptions);
    H5Eclear2(H5E_DEFAULT);

    auto function = call.substr(0, call.find('('));
    while (!function.empty() && function.back() == ' ') {
        function.remove_suffix(1);
    }
    std::string message = where + ": " + std::string(function) + " failed";
    if (!descriptions.empty()) {
        message += ": " + descriptions.front();
        if (descriptions.size() > 1 && descriptions.back() != descriptions.front()) {
            message += " (" + descriptions.back() + ")";
        }
    }
    return message;
}

void throw_hdf5_error(std::string_view call, const std::string& where, const char* file, int line)
{
    throw Hdf5Error(hdf5_error_message(call, where), file, line);
}

}  // namespace detail

namespace detail {

std::string describe_type(hid_t type)
{
    const auto cls = H5Tget_class(type);
    const auto bits = std::to_string(8 * H5Tget_size(type));
    switch (cls) {
        case H5T_INTEGER:
            return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + bits;
        case H5T_FLOAT:
            return "float" + bits;
        case H5T_STRING:
            return "string";
        case H5T_COMPOUND:
            return "compound";
        case H5T_ENUM:
            return "enum";
        case H5T_ARRAY:
            return "array";
        default:
            return "HDF5 type class " + std::to_string(static_cast<int>(cls));
    }
}

}  // namespace detail

}  // namespace halo::store
