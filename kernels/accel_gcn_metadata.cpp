#include "halo/kernels_host/accel_gcn_metadata.hpp"

#include <cstdint>
#include <limits>
#include <vector>

#include "halo/core/error.hpp"
#include "metadata_checks.hpp"

namespace halo {
namespace {

std::vector<std::int64_t> flatten(const std::vector<RowRange>& ranges)
{
    std::vector<std::int64_t> out;
    out.reserve(2 * ranges.size());
    for (const auto& r : ranges) {
        out.push_back(r.begin);
        out.push_back(r.end);
    }
    return out;
}

std::int32_t narrow_option(const KernelMetadata& md, const char* name)
{
    const auto value = md.int_value(name);
    if (value < 0 || value > std::numeric_limits<std::int32_t>::max()) {
        HALO_THROW(InputError, md.origin, ": attribute ", name, " = ", value,
                   " is not a valid option value");
    }
    return static_cast<std::int32_t>(value);
}

}  // namespace

KernelMetadata accel_gcn_to_metadata(const AccelGcnPartition& p, const CsrView& a,
                                     const std::string& op)
{
    auto md = metadata_for_operator(accel_gcn_metadata_kernel, op, a);
    md.ints["warps_per_block"] = p.options.warps_per_block;
    md.ints["deg_bound"] = p.options.deg_bound;
    md.ints["degree_sort"] = p.options.degree_sort ? 1 : 0;
    md.int32_arrays["sorted_rows"] = {p.sorted_rows.begin(), p.sorted_rows.end()};
    auto& blocks = md.int32_arrays["blocks"];
    blocks.reserve(4 * p.blocks.size());
    for (const auto& b : p.blocks) {
        blocks.insert(blocks.end(), {b.degree, b.first_row, b.first_nonzero, b.info});
    }
    md.int32_arrays["split_rows"] = {p.split_rows.begin(), p.split_rows.end()};
    md.int64_arrays["segments"] = flatten(p.segments);
    md.int64_arrays["segment_rows"] = p.segment_rows;
    md.int64_arrays["segment_blocks"] = p.segment_blocks;
    md.int64_arrays["segment_split_rows"] = p.segment_split_rows;
    return md;
}

AccelGcnPartition accel_gcn_from_metadata(const KernelMetadata& md, const CsrView& a)
{
    detail::expect_metadata(md, accel_gcn_metadata_kernel, a);
    AccelGcnPartition p;
    p.options.warps_per_block = narrow_option(md, "warps_per_block");
    p.options.deg_bound = narrow_option(md, "deg_bound");
    const auto sort = md.int_value("degree_sort");
    if (sort != 0 && sort != 1) {
        HALO_THROW(InputError, md.origin, ": attribute degree_sort = ", sort,
                   " is not a flag (0 or 1)");
    }
    p.options.degree_sort = sort == 1;

    const auto& sorted = md.int32_array("sorted_rows");
    p.sorted_rows.assign(sorted.begin(), sorted.end());
    const auto& blocks = md.int32_array("blocks");
    if (blocks.size() % 4 != 0) {
        HALO_THROW(InputError, md.origin, "/blocks: ", blocks.size(),
                   " values, not a multiple of 4 (one int4 per block)");
    }
    p.blocks.resize(blocks.size() / 4);
    for (std::size_t b = 0; b < p.blocks.size(); ++b) {
        p.blocks[b] = {blocks[4 * b], blocks[4 * b + 1], blocks[4 * b + 2], blocks[4 * b + 3]};
    }
    const auto& split = md.int32_array("split_rows");
    p.split_rows.assign(split.begin(), split.end());
    const auto& segments = md.int64_array("segments");
    if (segments.size() % 2 != 0) {
        HALO_THROW(InputError, md.origin, "/segments: ", segments.size(),
                   " values, not (begin, end) pairs");
    }
    p.segments.clear();
    for (std::size_t s = 0; s < segments.size(); s += 2) {
        p.segments.push_back({segments[s], segments[s + 1]});
    }
    p.segment_rows = md.int64_array("segment_rows");
    p.segment_blocks = md.int64_array("segment_blocks");
    p.segment_split_rows = md.int64_array("segment_split_rows");
    const auto tables = p.segments.size() + 1;
    if (p.segment_rows.size() != tables || p.segment_blocks.size() != tables ||
        p.segment_split_rows.size() != tables) {
        HALO_THROW(InputError, md.origin, ": ", p.segments.size(),
                   " segments need segment tables of ", tables, " entries; found ",
                   p.segment_rows.size(), ", ", p.segment_blocks.size(), " and ",
                   p.segment_split_rows.size());
    }
    detail::check_stored(md, [&] {
        accel_gcn_gather_nonzeros(a, p);
        validate_accel_gcn_partition(a, p);
    });
    return p;
}

}  // namespace halo
