#include "halo/kernels_host/fused3s_metadata.hpp"

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "metadata_checks.hpp"

namespace halo {
namespace {

// The file stores int32, int64 and float32 arrays only: the 64-bit bitmap words travel as int64
// with their bits unchanged.
std::vector<std::int64_t> to_signed(const std::vector<std::uint64_t>& words)
{
    std::vector<std::int64_t> out(words.size());
    for (std::size_t i = 0; i < words.size(); ++i) {
        out[i] = std::bit_cast<std::int64_t>(words[i]);
    }
    return out;
}

std::vector<std::uint64_t> to_unsigned(const std::vector<std::int64_t>& words)
{
    std::vector<std::uint64_t> out(words.size());
    for (std::size_t i = 0; i < words.size(); ++i) {
        out[i] = std::bit_cast<std::uint64_t>(words[i]);
    }
    return out;
}

using detail::expect_length;

void expect_tile(const KernelMetadata& md, const char* name, std::int64_t expected)
{
    const auto value = md.int_value(name);
    if (value != expected) {
        HALO_THROW(InputError, md.origin, ": attribute ", name, " = ", value,
                   ", this build's BSB tiles have ", expected);
    }
}

}  // namespace

KernelMetadata bsb_to_metadata(const Bsb& bsb, const Csr& a, const std::string& op)
{
    HALO_EXPECTS(bsb.num_rows == a.num_rows && bsb.num_cols == a.num_cols && bsb.nnz == a.nnz(),
                 "a BSB of ", bsb.num_rows, " x ", bsb.num_cols, " with ", bsb.nnz,
                 " nonzeros stored for an operator of ", a.num_rows, " x ", a.num_cols, " with ",
                 a.nnz());
    auto md = metadata_for_operator(fused3s_metadata_kernel, op, a.view());
    md.ints["window_rows"] = kBsbWindowRows;
    md.ints["block_cols"] = kBsbBlockCols;
    md.ints["num_blocks"] = bsb.num_blocks();
    md.int64_arrays["window_blocks"] = bsb.window_blocks;
    md.int32_arrays["block_columns"] = bsb.block_columns;
    md.int64_arrays["block_bitmaps"] = to_signed(bsb.block_bitmaps);
    md.int32_arrays["window_order"] = bsb.window_order;
    return md;
}

Bsb bsb_from_metadata(const KernelMetadata& md, const Csr& a)
{
    detail::expect_metadata(md, fused3s_metadata_kernel, a.view());
    expect_tile(md, "window_rows", kBsbWindowRows);
    expect_tile(md, "block_cols", kBsbBlockCols);
    const auto windows = (md.rows + kBsbWindowRows - 1) / kBsbWindowRows;
    // A block holds at least one nonzero (validate checks it), so nnz bounds the count and the
    // lengths below cannot overflow.
    const auto blocks = md.int_value("num_blocks");
    if (blocks < 0 || blocks > md.nnz) {
        HALO_THROW(InputError, md.origin, ": attribute num_blocks = ", blocks, " outside [0, ",
                   md.nnz, "] for ", md.nnz, " nonzeros");
    }
    Bsb bsb;
    bsb.num_rows = md.rows;
    bsb.num_cols = md.cols;
    bsb.nnz = md.nnz;
    bsb.window_blocks = md.int64_array("window_blocks");
    bsb.block_columns = md.int32_array("block_columns");
    bsb.block_bitmaps = to_unsigned(md.int64_array("block_bitmaps"));
    bsb.window_order = md.int32_array("window_order");
    expect_length(md, bsb.window_blocks, "window_blocks", windows + 1,
                  "one more than the row windows");
    const auto per_block = [&](const char* what) {
        return std::string(what) + " per block, num_blocks = " + std::to_string(blocks);
    };
    expect_length(md, bsb.block_columns, "block_columns", kBsbBlockCols * blocks,
                  per_block("8").c_str());
    expect_length(md, bsb.block_bitmaps, "block_bitmaps", 2 * blocks, per_block("2 words").c_str());
    expect_length(md, bsb.window_order, "window_order", windows, "one per row window");
    if (bsb.window_blocks.back() != blocks) {
        HALO_THROW(InputError, md.origin, "/window_blocks: ends at ", bsb.window_blocks.back(),
                   ", expected num_blocks = ", blocks);
    }
    detail::check_stored(md, [&] { validate(bsb, a, "BSB"); });
    return bsb;
}

}  // namespace halo
