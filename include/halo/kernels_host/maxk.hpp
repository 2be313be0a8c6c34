// MaxK-GNN (paper 000; docs/KERNELS.md "Families", docs/MAXK.md): the MaxK nonlinearity keeps the k
// largest values of each embedding row, stored row-balanced in CBSR, and aggregation multiplies the
// adjacency by that sparse matrix into a dense output (the sparse-sparse-dense, SSD, operator).
// This header holds the backend-free pieces: the CBSR containers, the edge groups that the SSD
// kernels split rows into (section III; update_mode is section IV-A's smart edge group), and the
// CPU references.
//
// Top-k order (the tie rule; the CUDA kernel follows it exactly, so results compare bit for bit):
// a row's entries are ranked by maxk_order_key(value) descending, then by column ascending (of
// equal keys the lower column wins). The key orders floats as numbers, with -0.0 below +0.0, and
// every NaN above +inf, as torch.topk does: a row with NaNs keeps them (lower columns first) and
// they propagate through the SSD into every output row that aggregates it, instead of being
// silently pruned. The k winners are stored in ascending column order, with their values' bits
// unchanged (NaN payloads included).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/dense.hpp"

namespace halo {

/// Column index type of CBSR: int16. Widths up to kMaxkMaxDim fit with room to spare, and the
/// halo exchange (which sends CBSR rows) and the SSD's reads of the sparse embedding move 6 bytes
/// per kept entry instead of 8 with int32. (MaxK's own code uses uint8 for widths up to 256.)
using cbsr_index = std::int16_t;

/// Widest embedding the MaxK kernels take (one warp holds a row of top-k in registers; an SSD edge
/// group holds one row of the output in shared memory).
inline constexpr std::int64_t kMaxkMaxDim = 1024;

/// Non-owning view of a CBSR matrix of `rows` x `dim` with exactly `k` entries per row: entry t of
/// row i is (indices[i * k + t], values[i * k + t]), columns strictly ascending within a row. T is
/// float or const float; the indices share its constness.
template <typename T>
struct CbsrView {
    using Index = std::conditional_t<std::is_const_v<T>, const cbsr_index, cbsr_index>;

    T* values = nullptr;
    Index* indices = nullptr;
    std::int64_t rows = 0;
    std::int64_t dim = 0;  // the unpruned width D
    std::int64_t k = 0;

    std::int64_t entries() const noexcept { return rows * k; }

    operator CbsrView<const std::remove_const_t<T>>() const requires(!std::is_const_v<T>)
    {
        return {values, indices, rows, dim, k};
    }
};

/// Owning host CBSR matrix.
struct Cbsr {
    std::int64_t rows = 0;
    std::int64_t dim = 0;
    std::int64_t k = 0;
    std::vector<float> values;        // rows * k
    std::vector<cbsr_index> indices;  // rows * k

    Cbsr() = default;
    /// Zero-filled storage for rows x dim with k entries per row (checks the shape).
    Cbsr(std::int64_t rows, std::int64_t dim, std::int64_t k);

    CbsrView<float> view() noexcept { return {values.data(), indices.data(), rows, dim, k}; }
    CbsrView<const float> view() const noexcept
    {
        return {values.data(), indices.data(), rows, dim, k};
    }
};

/// Throws halo::LogicError unless 1 <= dim <= kMaxkMaxDim, 1 <= k <= dim and rows >= 0.
void check_cbsr_shape(std::int64_t rows, std::int64_t dim, std::int64_t k);

/// Checks a CBSR's contents: every index in [0, dim) and strictly ascending within its row.
/// Throws halo::InputError naming `what`, the row, the entry and the value.
void validate(CbsrView<const float> s, const char* what);

/// The top-k ranking key of a value: larger key = ranks first. IEEE order for numbers with -0.0
/// below +0.0 (the bit pattern mapped to an unsigned total order); every NaN maps to the largest
/// key. Keys of numbers are >= 0x007FFFFF (-inf), so 0 is never a key.
inline std::uint32_t maxk_order_key(float value) noexcept
{
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
        return 0xFFFFFFFFu;
    }
    return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// ---------------------------------------------------------------------------------------------
// Edge groups (section III: static nonzero splitting into EGs; section IV-A: smart EGs).

struct EdgeGroupOptions {
    /// Most nonzeros of one group (MaxK's warp_max_nz is 64). 1 .. 2^30.
    std::int32_t group_size = 64;
};

/// Throws halo::InputError naming the option and its value.
void validate(const EdgeGroupOptions& options);

/// Each row's nonzeros, in storage order, cut into consecutive groups of group_size (the last one
/// of a row takes the rest); groups ordered by row, then position. An empty row has one group of 0
/// nonzeros, so every row has at least one group and a kernel that writes each group's output
/// with a plain store also writes the empty rows' zeros. update_mode is 1 when the group's row has
/// other groups (the paper compares the row ids of neighbouring groups; rows' groups are adjacent
/// here, so that is "the row has more than one group"): those groups add their partial sums with
/// atomics, the others store. Plain arrays of one entry per group, as the dataset stores them
/// (/parts/<p>/kernels/maxk).
struct EdgeGroups {
    std::int32_t group_size = 64;
    std::int64_t num_rows = 0;  // rows of the operator they were built for
    std::int64_t nnz = 0;       // its nonzeros
    std::vector<std::int32_t> row;
    std::vector<std::int32_t> count;        // nonzeros of the group, 0 .. group_size
    std::vector<std::int64_t> first;        // position of its first nonzero in the CSR arrays
    std::vector<std::int32_t> update_mode;  // 0: plain store, 1: atomic add (shared row)

    std::int64_t size() const noexcept { return static_cast<std::int64_t>(row.size()); }
};

/// Builds the edge groups of `a` (one pass over the rows). Throws halo::InputError for invalid
/// options or when a has 2^31 rows or more (group row ids are int32).
EdgeGroups build_edge_groups(const CsrView& a, const EdgeGroupOptions& options = {});

/// Checks groups read back from a file against the operator they are used with: equal array
/// lengths; group_size, num_rows and nnz matching; every row in range with groups ascending;
/// count in [0, group_size], 0 only for an empty row's single group; the groups of a row tiling its
/// nonzeros exactly in order (first of the row's first group == indptr[row], each next first ==
/// previous first + count, the last ending at indptr[row + 1]); every row present; update_mode ==
/// 1 exactly for rows of several groups. Throws halo::InputError naming `what`, the first bad
/// group, the field and its value.
void validate(const EdgeGroups& groups, const CsrView& a, const char* what = "edge groups");

/// Groups [begin, end) of the rows of `rows` (contiguous: groups are ordered by row).
struct GroupRange {
    std::int64_t begin = 0;
    std::int64_t end = 0;
};
GroupRange edge_group_range(const EdgeGroups& groups, RowRange rows);

/// Rows of `groups` with update_mode 1 (several groups), ascending: the rows that atomic-aware
/// kernels zero before adding into them.
std::vector<std::int32_t> shared_rows(const EdgeGroups& groups);

/// The groups of `range` (edge_group_range), as indices into `groups`, by count descending, ties
/// in storage order (a stable sort). The order in which the GPU's SSD plan hands groups to warps
/// (halo::cuda::SsdOrder::longest_first). Throws halo::InputError when the range is outside
/// [0, groups.size()] or an index would not fit in int32.
std::vector<std::int32_t> longest_first(const EdgeGroups& groups, GroupRange range);

// ---------------------------------------------------------------------------------------------
// The SSD operator as a plan (backend-neutral; the CUDA plans are in halo/kernels/cuda/maxk.hpp).

/// out[i, :] = sum_c A[i, c] * S[c, :] for the rows i in `rows`, S given in CBSR; rows of out
/// outside the range, and columns beyond s.dim, are untouched. Requirements: s.rows >= A's
/// columns, out.rows >= A's rows, out.cols == s.dim <= the plan's max_dim.
class SsdPlan {
public:
    virtual ~SsdPlan() = default;
    virtual void run(CbsrView<const float> s, DenseView<float> out, RowRange rows) = 0;
    virtual std::string algorithm() const = 0;
};

}  // namespace halo

namespace halo::reference {

/// Top-k of every row of x (out.rows == x.rows, out.dim == x.cols, k = out.k) under the order
/// above, written in ascending column order. Plain loops (a sort per row), OpenMP across rows.
void maxk_topk(DenseView<const float> x, CbsrView<float> out);
Cbsr maxk_topk(DenseView<const float> x, std::int64_t k);

/// The dense matrix of a CBSR: out[i, :] = 0 except out[i, indices] = values (out.rows ==
/// s.rows, out.cols == s.dim).
void cbsr_to_dense(CbsrView<const float> s, DenseView<float> out);

/// The SSD reference: out[i, :] = sum over row i's nonzeros (c, a) of a * S[c, :] (S as dense),
/// accumulated in float in storage order, for i in `rows` (OpenMP across rows). Pattern matrices
/// (values null) use 1. Rows outside `rows` are untouched.
void ssd(const CsrView& a, CbsrView<const float> s, DenseView<float> out, RowRange rows);

/// The GPU schedule on the host, to test it without a GPU: every group of the range accumulates
/// its nonzeros in order into a zeroed D-wide buffer with fmaf (buffer[j] = fmaf(a, s_cj,
/// buffer[j]) for each kept entry (j, s_cj) of row c: the kernels' arithmetic), then update_mode 0
/// stores the buffer as the row's output and update_mode 1 adds it (rows of mode 1 are zeroed
/// first; groups add in group order). Rows of a single group come out bit-identical to the CUDA
/// kernels.
void ssd_edge_groups(const EdgeGroups& groups, const CsrView& a, CbsrView<const float> s,
                     DenseView<float> out, RowRange rows);

/// An SsdPlan running reference::ssd on the host (a CPU backend's MaxK aggregation). Keeps a copy
/// of `a`; max_dim <= kMaxkMaxDim.
std::unique_ptr<SsdPlan> make_cpu_ssd_plan(const Csr& a, std::int64_t max_dim);

}  // namespace halo::reference
