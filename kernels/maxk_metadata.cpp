#include "halo/kernels_host/maxk_metadata.hpp"

#include <cstdint>
#include <limits>
#include <vector>

#include "halo/core/error.hpp"
#include "metadata_checks.hpp"

namespace halo {
namespace {

// Every per-group array must hold exactly num_groups values; checked here so that the message
// names the array, while validate() below checks what the values mean.
template <typename T>
void expect_groups(const KernelMetadata& md, const std::vector<T>& values, const char* name,
                   std::int64_t groups)
{
    detail::expect_length(md, values, name, groups, "num_groups");
}

}  // namespace

KernelMetadata edge_groups_to_metadata(const EdgeGroups& groups, const CsrView& a,
                                       const std::string& op)
{
    HALO_EXPECTS(groups.num_rows == a.num_rows && groups.nnz == a.nnz(), "edge groups of ",
                 groups.num_rows, " rows and ", groups.nnz, " nonzeros stored for an operator of ",
                 a.num_rows, " rows and ", a.nnz());
    auto md = metadata_for_operator(maxk_metadata_kernel, op, a);
    md.ints["group_size"] = groups.group_size;
    md.ints["num_groups"] = groups.size();
    md.int32_arrays["row"] = groups.row;
    md.int32_arrays["count"] = groups.count;
    md.int64_arrays["first"] = groups.first;
    md.int32_arrays["update_mode"] = groups.update_mode;
    return md;
}

EdgeGroups edge_groups_from_metadata(const KernelMetadata& md, const CsrView& a)
{
    detail::expect_metadata(md, maxk_metadata_kernel, a);
    EdgeGroups g;
    const auto size = md.int_value("group_size");
    if (size < 1 || size > std::numeric_limits<std::int32_t>::max()) {
        HALO_THROW(InputError, md.origin, ": attribute group_size = ", size,
                   " is not a valid group size");
    }
    g.group_size = static_cast<std::int32_t>(size);
    const auto groups = md.int_value("num_groups");
    // Every row has at least one group and no group is empty unless its row is.
    if (groups < a.num_rows || groups > a.num_rows + a.nnz()) {
        HALO_THROW(InputError, md.origin, ": attribute num_groups = ", groups, " outside [",
                   a.num_rows, ", ", a.num_rows + a.nnz(), "] for ", a.num_rows, " rows and ",
                   a.nnz(), " nonzeros");
    }
    g.num_rows = md.rows;
    g.nnz = md.nnz;
    g.row = md.int32_array("row");
    g.count = md.int32_array("count");
    g.first = md.int64_array("first");
    g.update_mode = md.int32_array("update_mode");
    expect_groups(md, g.row, "row", groups);
    expect_groups(md, g.count, "count", groups);
    expect_groups(md, g.first, "first", groups);
    expect_groups(md, g.update_mode, "update_mode", groups);
    detail::check_stored(md, [&] { validate(g, a, "edge groups"); });
    return g;
}

}  // namespace halo
