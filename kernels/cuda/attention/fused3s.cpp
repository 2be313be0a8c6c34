// Host side of the Fused3S plan (include/halo/cuda/fused3s.hpp): uploads the BSB once, owns the
// fp16 workspaces of the fp32 entry point, checks operands and launches the kernel (fused3s.cu).
//
// Choices:
// - The BSB is validated before upload: a stored format is trusted by the kernel only after the
//   checks that keep its gathers in bounds (columns in range, offsets consistent).
// - Both window orders live on the device: natural order is the BSB's window ids; the reordered
//   one is the BSB's window_order, so the ablation switch costs nothing at run time.
// - The fp16 workspaces hold num_rows x max_dim (Q) and num_cols x max_dim (K, V) with ld = d,
//   allocated once with the plan (no allocation per call).
#include "halo/cuda/fused3s.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda/attention/fused3s_kernels.hpp"
#include "cuda/primitives/upload.hpp"
#include "halo/cuda_error.hpp"
#include "halo/error.hpp"

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

struct Fused3sPlan::Impl {
    Context& ctx;
    Bsb bsb;
    std::int64_t max_dim = 0;
    Fused3sOptions options;
    DeviceBuffer<std::int64_t> window_blocks;
    DeviceBuffer<std::int32_t> block_columns;
    DeviceBuffer<std::uint64_t> block_bitmaps;
    DeviceBuffer<std::int32_t> window_order;
    DeviceBuffer<__half> q16;
    DeviceBuffer<__half> k16;
    DeviceBuffer<__half> v16;

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
            q16 = DeviceBuffer<__half>(ctx, static_cast<std::size_t>(bsb.num_rows * max_dim));
            k16 = DeviceBuffer<__half>(ctx, static_cast<std::size_t>(bsb.num_cols * max_dim));
            v16 = DeviceBuffer<__half>(ctx, static_cast<std::size_t>(bsb.num_cols * max_dim));
        }
        // Once, at setup: a failed upload surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
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
    detail::Fused3sArgs args;
    args.window_blocks = impl_->window_blocks.data();
    args.block_columns = impl_->block_columns.data();
    args.block_bitmaps = impl_->block_bitmaps.data();
    args.window_order = impl_->options.reorder_windows ? impl_->window_order.data() : nullptr;
    args.num_windows = bsb.num_windows();
    args.num_rows = bsb.num_rows;
    args.q = q.data;
    args.ldq = q.ld;
    args.k = k.data;
    args.ldk = k.ld;
    args.v = v.data;
    args.ldv = v.ld;
    args.out = out.data;
    args.ldo = out.ld;
    args.scale = scale;
    args.row_begin = rows.begin;
    args.row_end = rows.end;
    args.vector_out = aligned16(out.data) && out.ld % 4 == 0;
    detail::launch_fused3s(impl_->ctx.compute_stream(), static_cast<int>(dim),
                           impl_->options.remap_registers, args);
}

void Fused3sPlan::run(DenseView<const float> q, DenseView<const float> k, DenseView<const float> v,
                      float scale, DenseView<float> out, RowRange rows)
{
    const auto& bsb = impl_->bsb;
    const std::int64_t dim = q.cols;
    HALO_EXPECTS(dim <= impl_->max_dim, "width ", dim, " exceeds the plan's max_dim ",
                 impl_->max_dim);
    HALO_EXPECTS(k.cols == dim && v.cols == dim, "Q, K and V have ", dim, ", ", k.cols, " and ",
                 v.cols, " columns; the fused kernel needs one width");
    HALO_EXPECTS(q.rows >= bsb.num_rows, "Q has ", q.rows, " rows, expected ", bsb.num_rows);
    HALO_EXPECTS(k.rows >= bsb.num_cols && v.rows >= bsb.num_cols, "K and V have ", k.rows, " and ",
                 v.rows, " rows, expected ", bsb.num_cols);
    HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= bsb.num_rows,
                 "row range [", rows.begin, ", ", rows.end, ") outside [0, ", bsb.num_rows, ")");
    const cudaStream_t stream = impl_->ctx.compute_stream();
    const DenseView<__half> q16{impl_->q16.data(), bsb.num_rows, dim, dim};
    const DenseView<__half> k16{impl_->k16.data(), bsb.num_cols, dim, dim};
    const DenseView<__half> v16{impl_->v16.data(), bsb.num_cols, dim, dim};
    // The kernel reads the Q rows of the windows that meet the range: convert only those.
    const std::int64_t q_begin = rows.begin / kBsbWindowRows * kBsbWindowRows;
    const std::int64_t q_end =
        std::min((rows.end + kBsbWindowRows - 1) / kBsbWindowRows * kBsbWindowRows, bsb.num_rows);
    if (q_end > q_begin) {
        convert_to_half(DenseView<const float>{q.data + q_begin * q.ld, q_end - q_begin, dim, q.ld},
                        DenseView<__half>{q16.data + q_begin * dim, q_end - q_begin, dim, dim},
                        stream);
    }
    convert_to_half(DenseView<const float>{k.data, bsb.num_cols, dim, k.ld}, k16, stream);
    convert_to_half(DenseView<const float>{v.data, bsb.num_cols, dim, v.ld}, v16, stream);
    run(DenseView<const __half>{q16.data, q16.rows, q16.cols, q16.ld},
        DenseView<const __half>{k16.data, k16.rows, k16.cols, k16.ld},
        DenseView<const __half>{v16.data, v16.rows, v16.cols, v16.ld}, scale, out, rows);
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
