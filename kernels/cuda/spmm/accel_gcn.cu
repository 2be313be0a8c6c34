// Accel-GCN SpMM kernels (paper 001, section III-D); the plan that launches them is accel_gcn.cpp.
//
// Kernel mapping, one thread block per int4 of metadata, blockDim = 32 * warps_per_block:
// - Combined warps: the c = ceil(width / 32) passes of the paper's outer loop give each thread the
//   virtual ids t = threadIdx.x + pass * blockDim.x; combined warp t / (32 c) takes logical warp
//   (t / 32c)'s nonzeros, lane t % (32 c) one dense column; lanes >= width idle. Consecutive
//   threads read consecutive columns of one x row (coalesced).
// - A block whose rows take one warp each writes each lane's sum with a plain store. Rows shared
//   by several warps add their partials in shared memory (atomicAdd_block), then the block stores
//   them. Chunks of a split row (degree > deg_bound) reduce in shared memory the same way and add
//   the block's sum to y with one atomicAdd per column, after a kernel zeroed those rows. The
//   kernel is that zeroing's programmatic dependent (dependent_launch.cuh): it sums while the
//   zeroing runs and waits for it only before those atomic adds.
// - Wide dense matrices: the shared accumulator holds at most warps_per_block / 2 rows of a column
//   tile; widths beyond the tile run as several tiles (gridDim.y), each a combined-warp sweep.
// - Ablation (AccelGcnOptions::combined_warps = false): the same nonzero groups and columns, but
//   warp w loops over the column slices of its own group (the paper's Fig. 4(a)).
// - fp16/bf16 features: one column per lane as for fp32, widened to fp32 at the load.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "cuda/primitives/dependent_launch.cuh"
#include "cuda/primitives/feature_load.cuh"
#include "cuda/spmm/accel_gcn_kernels.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"

namespace halo::cuda::detail {
namespace {

// Shared memory of one block without the opt-in for more (every device since sm_20 has it).
constexpr int kSharedBytes = 48 * 1024;

// Rows of shared accumulator a block may need: warps_per_block / 2 rows when rows share warps
// (a row of f >= 2 warps leaves at most warps / f rows), one for a split row.
int shared_rows(int warps_per_block)
{
    return std::max(1, warps_per_block / 2);
}

// What a nonzero multiplies its x row by: 1 (a pattern), its stored value, or the column scaling
// of a pattern operator (no values array; the row scaling multiplies each row's result).
enum Entries : int { kPattern = 0, kValues = 1, kColumnScaled = 2 };

template <int kEntries, bool kCombined, typename T>
__global__ void accel_gcn_kernel(const int4* __restrict__ blocks,
                                 const int* __restrict__ sorted_rows,
                                 const int* __restrict__ indices, const float* __restrict__ values,
                                 const float* __restrict__ row_scale,
                                 const float* __restrict__ col_scale, const T* __restrict__ x,
                                 long long ldx, float* __restrict__ y, long long ldy, int d,
                                 int tile, int deg_bound, int warp_cap)
{
    extern __shared__ float shared[];
    end_after_prerequisite();  // the grid ends after the zeroing it may depend on
    const int4 m = blocks[blockIdx.x];
    const int col0 = static_cast<int>(blockIdx.y) * tile;
    const int width = min(tile, d - col0);
    const int round_dim = (width + 31) / 32 * 32;
    const int warps = static_cast<int>(blockDim.x) / 32;
    const int passes = round_dim / 32;
    const bool split = m.x > deg_bound;
    int rows = 1;
    int per_warp = warp_cap;
    int warps_per_row = warps;
    if (!split) {
        rows = m.w & 0xFFFF;
        per_warp = (m.w >> 16) & 0xFFFF;
        warps_per_row = per_warp == 0 ? 1 : (m.x + per_warp - 1) / per_warp;
    }
    // Uniform across the block (it depends on the block's metadata only): the barriers below are
    // reached by every thread or by none.
    const bool use_shared = split || warps_per_row > 1;
    if (use_shared) {
        for (int i = threadIdx.x; i < rows * width; i += blockDim.x) {
            shared[i] = 0.0f;
        }
        __syncthreads();
    }
    // Nonzero group `cw` (a logical warp of the partition) on column `lane` of the tile.
    const auto sweep = [&](int cw, int lane) {
        if (lane >= width) {
            return;
        }
        int r = 0;
        long long first = m.z;
        int b = 0;
        int e = 0;
        if (split) {
            b = min(cw * per_warp, m.w);
            e = min(b + per_warp, m.w);
        } else {
            if (cw >= rows * warps_per_row) {
                return;
            }
            r = cw / warps_per_row;
            first += static_cast<long long>(r) * m.x;
            b = min((cw % warps_per_row) * per_warp, m.x);
            e = min(b + per_warp, m.x);
        }
        const T* xc = x + col0 + lane;
        float sum = 0.0f;
        for (long long k = first + b; k < first + e; ++k) {
            const int c = indices[k];
            const float v = kEntries == kValues          ? values[k]
                            : kEntries == kColumnScaled ? col_scale[c]
                                                        : 1.0f;
            sum += v * load_feature(xc + static_cast<long long>(c) * ldx);
        }
        if (use_shared) {
            atomicAdd_block(&shared[r * width + lane], sum);
        } else {
            const int row = sorted_rows[m.y + r];
            y[static_cast<long long>(row) * ldy + col0 + lane] =
                row_scale != nullptr ? sum * row_scale[row] : sum;
        }
    };
    if constexpr (kCombined) {
        // Section III-D: pass p gives thread t the virtual id t + p * blockDim; c consecutive
        // warps (round_dim lanes) form combined warp id / round_dim over the whole tile width.
        for (int pass = 0; pass < passes; ++pass) {
            const int t = static_cast<int>(threadIdx.x) + pass * static_cast<int>(blockDim.x);
            sweep(t / round_dim, t % round_dim);
        }
    } else {
        // Fig. 4(a), the non-combined baseline: warp w keeps nonzero group w and walks the tile's
        // column slices of 32 one after another. The same (group, column) pairs as above.
        const int w = static_cast<int>(threadIdx.x) / 32;
        const int l = static_cast<int>(threadIdx.x) % 32;
        for (int slice = 0; slice < passes; ++slice) {
            sweep(w, slice * 32 + l);
        }
    }
    if (use_shared) {
        __syncthreads();
        if (split) {
            wait_for_prerequisite();  // the zeros of the split rows
        }
        for (int i = threadIdx.x; i < rows * width; i += blockDim.x) {
            const int row = sorted_rows[m.y + i / width];
            float* dst = y + static_cast<long long>(row) * ldy + col0 + i % width;
            // A split row's chunks each scale their part: the sum scales alike.
            const float sum = row_scale != nullptr ? shared[i] * row_scale[row] : shared[i];
            if (split) {
                atomicAdd(dst, sum);
            } else {
                *dst = sum;
            }
        }
    }
}

}  // namespace

int accel_gcn_tile_cap(int warps_per_block)
{
    return kSharedBytes / static_cast<int>(sizeof(float)) / shared_rows(warps_per_block) / 32 * 32;
}

namespace {

struct KernelArgs {
    dim3 grid;
    dim3 block;
    std::size_t shared_bytes;
    cudaStream_t stream;
    bool dependent;
    const int4* blocks;
    const std::int32_t* sorted_rows;
    const std::int32_t* indices;
    const float* values;
    const float* row_scale;
    const float* col_scale;
    std::int64_t ldx;
    float* y;
    std::int64_t ldy;
    int d;
    int tile;
    int deg_bound;
    int warp_cap;
};

template <int kEntries, bool kCombined, typename T>
void launch_kernel(const KernelArgs& k, const void* x)
{
    auto kernel = accel_gcn_kernel<kEntries, kCombined, T>;
    const bool dependent =
        k.dependent && fills_device(kernel, std::int64_t{k.grid.x} * k.grid.y,
                                    static_cast<int>(k.block.x), k.shared_bytes);
    detail::launch(kernel, k.grid, k.block, k.shared_bytes, k.stream, dependent, k.blocks,
                   k.sorted_rows, k.indices, k.values, k.row_scale, k.col_scale,
                   static_cast<const T*>(x), k.ldx, k.y, k.ldy, k.d, k.tile, k.deg_bound,
                   k.warp_cap);
}

template <int kEntries, typename T>
void launch_mapping(const KernelArgs& k, bool combined, const void* x)
{
    if (combined) {
        launch_kernel<kEntries, true, T>(k, x);
    } else {
        launch_kernel<kEntries, false, T>(k, x);
    }
}

template <typename T>
void launch_type(const KernelArgs& k, bool combined, const void* x)
{
    if (k.values != nullptr) {
        launch_mapping<kValues, T>(k, combined, x);
    } else if (k.col_scale != nullptr) {
        launch_mapping<kColumnScaled, T>(k, combined, x);
    } else {
        launch_mapping<kPattern, T>(k, combined, x);
    }
}

}  // namespace

void accel_gcn_spmm(cudaStream_t stream, bool dependent, const AccelGcnLaunch& launch,
                    const void* blocks,
                    std::int64_t block_count, const std::int32_t* sorted_rows,
                    const std::int32_t* indices, const float* values, const float* row_scale,
                    const float* col_scale, const void* x, FeatureType x_type, std::int64_t ldx,
                    float* y, std::int64_t ldy, std::int64_t d)
{
    if (block_count == 0 || d == 0) {
        return;
    }
    HALO_EXPECTS(block_count <= INT_MAX, "grid of ", block_count, " blocks");
    HALO_EXPECTS(d <= INT_MAX, "dense width ", d, " beyond int32");
    HALO_EXPECTS(launch.tile_cap >= 32 && launch.tile_cap % 32 == 0, "column tile ",
                 launch.tile_cap);
    const int tile = static_cast<int>(std::min<std::int64_t>(d, launch.tile_cap));
    const std::int64_t tiles = (d + tile - 1) / tile;
    HALO_EXPECTS(tiles <= 65535, "dense width ", d, " needs ", tiles, " column tiles");
    const KernelArgs args{
        dim3(static_cast<unsigned>(block_count), static_cast<unsigned>(tiles)),
        dim3(static_cast<unsigned>(32 * launch.warps_per_block)),
        static_cast<std::size_t>(shared_rows(launch.warps_per_block)) * tile * sizeof(float),
        stream,
        dependent,
        static_cast<const int4*>(blocks),
        sorted_rows,
        indices,
        values,
        row_scale,
        values == nullptr ? col_scale : nullptr,
        ldx,
        y,
        ldy,
        static_cast<int>(d),
        tile,
        launch.deg_bound,
        launch.warp_nonzeros};
    switch (x_type) {
        case FeatureType::fp32:
            launch_type<float>(args, launch.combined_warps, x);
            break;
        case FeatureType::fp16:
            launch_type<__half>(args, launch.combined_warps, x);
            break;
        case FeatureType::bf16:
            launch_type<__nv_bfloat16>(args, launch.combined_warps, x);
            break;
        default:
            HALO_EXPECTS(false, "unknown feature type ", static_cast<int>(x_type));
    }
    HALO_CUDA_CHECK_LAUNCH();
}

}  // namespace halo::cuda::detail
