// The SpMM cost model (host only, no CUDA): which exact kernel the CUDA backend runs for an
// operator and a dense width when nothing was timed for it (halo-infer's default `--spmm auto`
// without the autotuner's stored choices). It reads the operator's shape only (rows, columns,
// nonzeros, longest row), never its values, and the device's L2 size, and decides in O(1) per
// width; the shape costs one pass over the row offsets. The rules and their thresholds come from
// one measured sweep (docs/KERNELS.md "The cost model", docs/NOTEBOOK.md "The default without
// stored choices"): every shared graph and seven generated ones at widths 7..256 on an H100,
// where they are never more than 0.1% slower than cuSPARSE and within 2% of the autotuner's
// geomean; the chunked row-split and column-slice rules from later H100 and H200 runs
// (docs/NOTEBOOK.md "The cost model learns the chunked row-split and column slices").
#pragma once

#include <cstdint>
#include <string>

#include "halo/core/csr.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo {

/// What the cost model reads of an operator.
struct OperatorShape {
    std::int64_t rows = 0;
    std::int64_t nnz = 0;
    std::int64_t max_row_nnz = 0;
    /// Columns (the rows of X); 0: unknown, and no column-slice rule applies.
    std::int64_t cols = 0;
};

/// The shape of `a` (one pass over its row offsets).
OperatorShape operator_shape(const CsrView& a);

/// The kernels the model picks among, each a kernel of the SpMM registry
/// (halo/kernels_host/spmm_registry.hpp) under the name to_string gives; which operator forms each
/// takes is the registry's entry (SpmmKernel::forms), never a rule of the model's own.
enum class ModeledKernel { cusparse, accel_gcn, mergepath, rowsplit, rowchunk };

std::string to_string(ModeledKernel kernel);

/// The registry's entry of `kernel` (halo::LogicError if the registry has no such kernel).
const SpmmKernel& registry_entry(ModeledKernel kernel);

/// The model's decision for one width: the kernel, MergePath's merge items per segment (0: the
/// per-width default, mergepath::default_cost), the column slice (0: whole rows; else the kernel
/// runs once per slice of that many feature columns), the rule that decided, in words, and whether
/// MergePath loads X with L2 hints (MergePathOptions::hint_hot_bytes).
struct ModeledChoice {
    ModeledKernel kernel = ModeledKernel::cusparse;
    std::int64_t mergepath_cost = 0;
    std::int64_t column_slice = 0;
    const char* rule = "";
    bool l2_hints = false;
};

/// The rules, first match wins, among the rules whose kernel takes the operator's `form`
/// (registry_entry(kernel).takes(form); cuSPARSE takes every form, so the model always decides;
/// constants below):
///   1. no rows or no nonzeros, or more than 2^31 - 1 nonzeros: cuSPARSE (the other kernels'
///      tests stop below 2^31; cuSPARSE runs past it in 32-bit pieces);
///   2. a regular operator, longest row at most kRegularRowFactor times the mean: row-split;
///   3. a tiny sparse operator (rows + nonzeros at most kTinyItems, mean row at most
///      kTinyMeanRow) at width at most kTinyMaxWidth: Accel-GCN;
///   4. a small sparse operator without an extreme hub (fewer than kChunkMaxNnz nonzeros, mean
///      row below kChunkMaxMeanRow, longest row at most kChunkRowFactor times the mean) at width
///      at least kChunkMinWidth, where the device does not overlap MergePath's zeroing with its
///      kernel (`zeroing_overlapped` false): the chunked row-split (one launch, long rows cut
///      into units). Where it does (compute capability 9.0 and later, halo::cuda::
///      zeroing_overlapped), MergePath is one launch's worth too and was faster on 21 of 25
///      (graph, width) pairs of these operators (docs/NOTEBOOK.md "Rule 4 after the
///      dependent launch"): the rule does not apply;
///   5. a large operator (rows + nonzeros at least kLargeItems) at width at least kLargeMinWidth:
///      MergePath with kLargeCost merge items per segment; where also the width is above
///      kSliceWidth and X (cols x width floats) is at least kSliceCacheFactor times
///      `cache_bytes` (the device's L2; 0: unknown, never), over slices of kSliceWidth columns
///      (each slice gathers a part of each X row, so width / kSliceWidth times as many rows stay
///      in L2; docs/NOTEBOOK.md "The gather-bound limit");
///   6. width at least kWideMinWidth over a dense operator (mean row at least kWideMeanRow):
///      cuSPARSE;
///   7. otherwise MergePath at its per-width default cost.
/// Wherever MergePath is picked and the X one launch reads (cols x the width or the slice,
/// floats) is at least kHintCacheFactor times `cache_bytes`, it loads X with L2 hints: the rows of
/// the most-read columns that fit in kHintHotShare of the L2 evict_last, the others evict_first
/// (MergePathOptions::hint_hot_bytes; docs/NOTEBOOK.md "L2 hints for X past the L2").
///
/// With X of `x_type` fp16 or bf16 (16-bit activations), the rules choose among the kernels that
/// read it (SpmmKernel::reads); X's bytes in rule 5 and the hints count 2 bytes an element; where
/// a rule's kernel (cuSPARSE: rules 1, 6 and the fallbacks) does not read the type, MergePath
/// takes its place, and past 2^31 - 1 nonzeros no kernel does: halo::InputError, naming the
/// nonzeros and the type.
/// The kernel that runs X of `x_type` where the model's kernel cannot: cuSPARSE, or MergePath for
/// X that cuSPARSE does not read (both take every form). The cost model's own fallback and the
/// cost model's plan's, where a kernel rejects the operator.
ModeledKernel fallback_kernel(FeatureType x_type);

ModeledChoice spmm_cost_model(const OperatorShape& shape, std::int64_t width,
                              std::int64_t cache_bytes = 0, bool zeroing_overlapped = false,
                              SpmmForm form = spmm_form_values,
                              FeatureType x_type = FeatureType::fp32);

inline constexpr double kRegularRowFactor = 8.0;
inline constexpr std::int64_t kTinyItems = 200000;
inline constexpr double kTinyMeanRow = 8.0;
inline constexpr std::int64_t kTinyMaxWidth = 32;
inline constexpr std::int64_t kChunkMaxNnz = std::int64_t{1} << 19;
inline constexpr double kChunkMaxMeanRow = 16.0;
inline constexpr double kChunkRowFactor = 256.0;
inline constexpr std::int64_t kChunkMinWidth = 32;
inline constexpr std::int64_t kSliceWidth = 128;
inline constexpr std::int64_t kSliceCacheFactor = 8;
inline constexpr std::int64_t kHintCacheFactor = 32;
inline constexpr double kHintHotShare = 0.5;
inline constexpr std::int64_t kLargeItems = 2000000;
inline constexpr std::int64_t kLargeMinWidth = 64;
inline constexpr std::int64_t kLargeCost = 200;
inline constexpr std::int64_t kWideMinWidth = 192;
inline constexpr double kWideMeanRow = 20.0;

/// "rows 4194304, nonzeros 128314020, longest row 162719, d = 64: mergepath cost 200 (a large
/// operator at a wide width)".
std::string describe(const OperatorShape& shape, std::int64_t width, const ModeledChoice& choice);

}  // namespace halo
