// Host side of the Fused3S plan (include/halo/kernels/cuda/fused3s.hpp): uploads the BSB once, owns
// the fp16 workspaces of the fp32 entry point, checks operands and launches the kernel
// (fused3s.cu).
//
// Choices:
// - The BSB is validated before upload: a stored format is trusted by the kernel only after the
//   checks that keep its gathers in bounds (columns in range, offsets consistent).
// - Both window orders live on the device: natural order is the BSB's window ids; the reordered
//   one is the BSB's window_order, so the ablation switch costs nothing at run time.
// - The fp16 workspaces hold num_rows x max_dim (Q) and num_cols x 2 max_dim (K and V side by
//   side), allocated with the plan; a call whose zero-padded heads need more grows them once
//   (stream-ordered), later calls of that shape allocate nothing.
// - Heads: the fp32 entry converts every head of Q, K and V in one pass each (one pass for K and
//   V where they are adjacent columns of one matrix, as in the engine's shared buffer) and runs
//   them in one launch, one grid row per head, instead of three conversions and a launch per head.
// - Narrow heads: a head width d below an instance (1..255) runs the smallest instance above it on
//   copies zero-padded to that width; zero columns add nothing to Q K^T, V's zero columns give O
//   zero columns, and the kernel stores only O's first d columns. Same fp16 rounding as d itself.
#include "halo/kernels/cuda/fused3s.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda/attention/fused3s_kernels.hpp"
#include "cuda/primitives/upload.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda {
namespace {

using detail::upload;

bool aligned16(const void* p)
{
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

void check_half_operand(DenseView<const __half> x, const char* name, std::int64_t min_rows,
                        std::int64_t dim)
{
    HALO_EXPECTS(x.cols == dim, name, " has ", x.cols, " columns, expected ", dim);
    HALO_EXPECTS(x.rows >= min_rows, name, " has ", x.rows, " rows, expected at least ", min_rows);
    HALO_EXPECTS(x.ld >= x.cols && x.ld % 8 == 0, name, "'s leading dimension ", x.ld,
                 " must be a multiple of 8 and at least ", x.cols);
    HALO_EXPECTS(x.data != nullptr && aligned16(x.data), name,
                 " must be a 16-byte aligned device pointer");
}

}  // namespace

bool fused3s_supports_dim(std::int64_t dim)
{
    return dim == 32 || dim == 64 || dim == 128 || dim == 256;
}

std::int64_t fused3s_padded_dim(std::int64_t dim)
{
    for (const std::int64_t instance : {32, 64, 128, 256}) {
        if (dim >= 1 && dim <= instance) {
            return instance;
        }
    }
    return 0;
}

struct Fused3sPlan::Impl {
    Context& ctx;
    Bsb bsb;
    std::int64_t max_dim = 0;
    Fused3sOptions options;
    DeviceBuffer<std::int64_t> window_blocks;
    DeviceBuffer<std::int32_t> block_columns;
    DeviceBuffer<std::uint64_t> block_bitmaps;
    DeviceBuffer<std::int32_t> window_order;
    // The fp32 entry's fp16 copies: Q's heads side by side; K's heads, then V's. Sized for
    // max_dim at setup, grown where zero-padded heads need more.
    DeviceBuffer<__half> heads_q16;
    DeviceBuffer<__half> heads_kv16;

    Impl(Context& c, Bsb b, std::int64_t dim, Fused3sOptions o)
        : ctx(c), bsb(std::move(b)), max_dim(dim), options(o)
    {
        HALO_EXPECTS(max_dim >= 0, "max_dim ", max_dim, " is negative");
        validate(bsb, "the BSB of a Fused3S plan");
        window_blocks = upload(ctx, bsb.window_blocks);
        block_columns = upload(ctx, bsb.block_columns);
        block_bitmaps = upload(ctx, bsb.block_bitmaps);
        window_order = upload(ctx, bsb.window_order);
        if (max_dim > 0) {
            heads_q16 = DeviceBuffer<__half>(ctx, static_cast<std::size_t>(bsb.num_rows * max_dim));
            heads_kv16 =
                DeviceBuffer<__half>(ctx, static_cast<std::size_t>(bsb.num_cols * 2 * max_dim));
        }
        // Once, at setup: a failed upload surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
    }

    // A launch's format, output and row range (one head of O's full width until the caller says
    // otherwise); the caller adds Q, K and V.
    detail::Fused3sArgs args(float scale, DenseView<float> out, RowRange rows) const
    {
        detail::Fused3sArgs a;
        a.window_blocks = window_blocks.data();
        a.block_columns = block_columns.data();
        a.block_bitmaps = block_bitmaps.data();
        a.window_order = options.reorder_windows ? window_order.data() : nullptr;
        a.num_windows = bsb.num_windows();
        a.num_rows = bsb.num_rows;
        a.out = out.data;
        a.ldo = out.ld;
        a.out_cols = static_cast<int>(out.cols);
        a.scale = scale;
        a.row_begin = rows.begin;
        a.row_end = rows.end;
        a.vector_out = aligned16(out.data) && out.ld % 4 == 0;
        return a;
    }
};

Fused3sPlan::Fused3sPlan(Context& ctx, Bsb bsb, std::int64_t max_dim, Fused3sOptions options)
    : impl_(std::make_unique<Impl>(ctx, std::move(bsb), max_dim, options))
{
}

Fused3sPlan::~Fused3sPlan() = default;

std::int64_t Fused3sPlan::num_rows() const noexcept
{
    return impl_->bsb.num_rows;
}

std::int64_t Fused3sPlan::num_cols() const noexcept
{
    return impl_->bsb.num_cols;
}

std::int64_t Fused3sPlan::max_dim() const noexcept
{
    return impl_->max_dim;
}

const Bsb& Fused3sPlan::bsb() const noexcept
{
    return impl_->bsb;
}

const Fused3sOptions& Fused3sPlan::options() const noexcept
{
    return impl_->options;
}

void Fused3sPlan::set_options(const Fused3sOptions& options) noexcept
{
    impl_->options = options;
}

void Fused3sPlan::run(DenseView<const __half> q, DenseView<const __half> k,
                      DenseView<const __half> v, float scale, DenseView<float> out, RowRange rows)
{
    const auto& bsb = impl_->bsb;
    const std::int64_t dim = q.cols;
    HALO_EXPECTS(fused3s_supports_dim(dim), "the fused kernel supports d = 32, 64, 128, 256, not ",
                 dim);
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= bsb.num_rows,
                 "row range [", rows.begin, ", ", rows.end, ") outside [0, ", bsb.num_rows, ")");
    HALO_EXPECTS(out.cols == dim && out.rows >= bsb.num_rows && out.ld >= out.cols, "O is ",
                 out.rows, " x ", out.cols, " (ld ", out.ld, "), expected ", bsb.num_rows, " x ",
                 dim);
    if (rows.empty()) {
        return;
    }
    HALO_EXPECTS(out.data != nullptr, "O is null");
    check_half_operand(q, "Q", bsb.num_rows, dim);
    if (bsb.num_cols > 0) {
        check_half_operand(k, "K", bsb.num_cols, dim);
        check_half_operand(v, "V", bsb.num_cols, dim);
    }
    auto args = impl_->args(scale, out, rows);
    args.q = q.data;
    args.ldq = q.ld;
    args.k = k.data;
    args.ldk = k.ld;
    args.v = v.data;
    args.ldv = v.ld;
    detail::launch_fused3s(impl_->ctx.compute_stream(), static_cast<int>(dim),
                           impl_->options.remap_registers, args);
}

void Fused3sPlan::run(DenseView<const float> q, DenseView<const float> k, DenseView<const float> v,
                      float scale, DenseView<float> out, RowRange rows)
{
    HALO_EXPECTS(q.cols <= impl_->max_dim, "width ", q.cols, " exceeds the plan's max_dim ",
                 impl_->max_dim);
    run_heads(q, k, v, 1, scale, out, rows);
}

void Fused3sPlan::run_heads(DenseView<const float> q, DenseView<const float> k,
                            DenseView<const float> v, std::int64_t heads, float scale,
                            DenseView<float> out, RowRange rows)
{
    auto& im = *impl_;
    const auto& bsb = im.bsb;
    HALO_EXPECTS(heads >= 1 && heads <= 65535, "heads ", heads, " outside [1, 65535]");
    HALO_EXPECTS(q.cols % heads == 0, "Q's ", q.cols, " columns do not split into ", heads,
                 " heads");
    const std::int64_t d = q.cols / heads;
    const std::int64_t padded = fused3s_padded_dim(d);
    HALO_EXPECTS(padded > 0, "the fused kernel takes head widths 1 to 256, not ", d);
    HALO_EXPECTS(k.cols == q.cols && v.cols == q.cols && out.cols == q.cols, "Q, K, V and O have ",
                 q.cols, ", ", k.cols, ", ", v.cols, " and ", out.cols,
                 " columns; the fused kernel needs one width");
    HALO_EXPECTS(q.rows >= bsb.num_rows, "Q has ", q.rows, " rows, expected ", bsb.num_rows);
    HALO_EXPECTS(k.rows >= bsb.num_cols && v.rows >= bsb.num_cols, "K and V have ", k.rows, " and ",
                 v.rows, " rows, expected ", bsb.num_cols);
    HALO_EXPECTS(out.rows >= bsb.num_rows && out.ld >= out.cols, "O is ", out.rows, " x ", out.cols,
                 " (ld ", out.ld, "), expected ", bsb.num_rows, " x ", q.cols);
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= bsb.num_rows,
                 "row range [", rows.begin, ", ", rows.end, ") outside [0, ", bsb.num_rows, ")");
    if (rows.empty()) {
        return;
    }
    HALO_EXPECTS(out.data != nullptr, "O is null");
    const cudaStream_t stream = im.ctx.compute_stream();
    // fp16 copies, each head zero-padded to the instance width: Q's heads side by side (ld =
    // heads * padded), K's heads then V's (ld = 2 * heads * padded).
    const std::int64_t q_ld = heads * padded;
    const std::int64_t kv_ld = 2 * q_ld;
    const auto q_size = static_cast<std::size_t>(bsb.num_rows * q_ld);
    const auto kv_size = static_cast<std::size_t>(bsb.num_cols * kv_ld);
    if (im.heads_q16.size() < q_size) {
        im.heads_q16 = DeviceBuffer<__half>(im.ctx, q_size);
    }
    if (im.heads_kv16.size() < kv_size) {
        im.heads_kv16 = DeviceBuffer<__half>(im.ctx, kv_size);
    }
    // The kernel reads the Q rows of the windows that meet the range: convert only those.
    const std::int64_t q_begin = rows.begin / kBsbWindowRows * kBsbWindowRows;
    const std::int64_t q_end =
        std::min((rows.end + kBsbWindowRows - 1) / kBsbWindowRows * kBsbWindowRows, bsb.num_rows);
    __half* const q16 = im.heads_q16.data();
    __half* const kv16 = im.heads_kv16.data();
    detail::convert_groups_to_half(stream, q.data + q_begin * q.ld, q.ld, q16 + q_begin * q_ld,
                                   q_ld, q_end - q_begin, heads, d, padded);
    if (v.data == k.data + k.cols && v.ld == k.ld) {
        // K and V side by side (the engine's shared buffer): one conversion.
        detail::convert_groups_to_half(stream, k.data, k.ld, kv16, kv_ld, bsb.num_cols, 2 * heads,
                                       d, padded);
    } else {
        detail::convert_groups_to_half(stream, k.data, k.ld, kv16, kv_ld, bsb.num_cols, heads, d,
                                       padded);
        detail::convert_groups_to_half(stream, v.data, v.ld, kv16 + q_ld, kv_ld, bsb.num_cols,
                                       heads, d, padded);
    }
    auto args = im.args(scale, out, rows);
    args.q = q16;
    args.ldq = q_ld;
    args.k = kv16;
    args.ldk = kv_ld;
    args.v = kv16 + q_ld;
    args.ldv = kv_ld;
    args.heads = static_cast<int>(heads);
    args.q_head = padded;
    args.k_head = padded;
    args.v_head = padded;
    args.out_head = d;
    args.out_cols = static_cast<int>(d);
    args.vector_out = args.vector_out && d % 4 == 0;
    detail::launch_fused3s(stream, static_cast<int>(padded), im.options.remap_registers, args);
}

std::unique_ptr<Fused3sPlan> make_fused3s_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                               Fused3sOptions options)
{
    return std::make_unique<Fused3sPlan>(ctx, build_bsb(a), max_dim, options);
}

std::unique_ptr<Fused3sPlan> make_fused3s_plan(Context& ctx, Bsb bsb, std::int64_t max_dim,
                                               Fused3sOptions options)
{
    return std::make_unique<Fused3sPlan>(ctx, std::move(bsb), max_dim, options);
}

void fused_attention(Fused3sPlan& plan, DenseView<const float> q, DenseView<const float> k,
                     DenseView<const float> v, float scale, DenseView<float> out)
{
    plan.run(q, k, v, scale, out, RowRange{0, plan.num_rows()});
}

void fused_attention(Fused3sPlan& plan, DenseView<const float> q, DenseView<const float> k,
                     DenseView<const float> v, float scale, DenseView<float> out, RowRange rows)
{
    plan.run(q, k, v, scale, out, rows);
}

void convert_to_half(DenseView<const float> src, DenseView<__half> dst, cudaStream_t stream)
{
    HALO_EXPECTS(src.rows == dst.rows && src.cols == dst.cols, "converting ", src.rows, " x ",
                 src.cols, " into ", dst.rows, " x ", dst.cols);
    HALO_EXPECTS(src.ld >= src.cols && dst.ld >= dst.cols, "leading dimensions ", src.ld, " and ",
                 dst.ld, " below the width ", src.cols);
    detail::convert_to_half(stream, src.data, src.ld, dst.data, dst.ld, src.rows, src.cols);
}

}  // namespace halo::cuda
