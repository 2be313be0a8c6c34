// The SpMM cost model's rules (include/halo/kernels_host/spmm_cost_model.hpp). Host only, built
// with or without CUDA, so that CI checks the rules on machines without a GPU.
#include "halo/kernels_host/spmm_cost_model.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <string>

#include "halo/core/enum_names.hpp"
#include "halo/core/error.hpp"

namespace halo {

OperatorShape operator_shape(const CsrView& a)
{
    return {a.num_rows, a.nnz(), a.num_rows == 0 ? 0 : max_row_nnz(a), a.num_cols};
}

namespace {

constexpr std::array<EnumName<ModeledKernel>, 5> kKernelNames{{
    {ModeledKernel::cusparse, "cusparse"},
    {ModeledKernel::accel_gcn, "accel_gcn"},
    {ModeledKernel::mergepath, "mergepath"},
    {ModeledKernel::rowsplit, "rowsplit"},
    {ModeledKernel::rowchunk, "rowchunk"},
}};

}  // namespace

std::string to_string(ModeledKernel kernel)
{
    return std::string(enum_name(kKernelNames, kernel));
}

const SpmmKernel& registry_entry(ModeledKernel kernel)
{
    // Looked up once: the registry is a fixed table.
    static const auto entries = [] {
        std::array<const SpmmKernel*, kKernelNames.size()> out{};
        for (const auto& [value, name] : kKernelNames) {
            out[static_cast<std::size_t>(value)] = find_spmm_kernel(name, spmm_use_infer);
        }
        return out;
    }();
    const auto k = static_cast<std::size_t>(kernel);
    HALO_EXPECTS(k < entries.size() && entries[k] != nullptr, "the cost model's kernel ",
                 to_string(kernel), " is not a kernel of the SpMM registry");
    return *entries[k];
}

namespace {

// X's bytes at a width against a multiple of the cache, in double: cols x width overflows nothing.
bool x_past(const OperatorShape& s, std::int64_t width, std::int64_t factor,
            std::int64_t cache_bytes, FeatureType x_type)
{
    return cache_bytes > 0 && static_cast<double>(s.cols) * static_cast<double>(width) *
                                      static_cast<double>(feature_bytes(x_type)) >=
                                  static_cast<double>(factor) * static_cast<double>(cache_bytes);
}

// The fp32 rules (cuSPARSE where they say so), for X of any type: pick_kernel() puts MergePath
// where cuSPARSE does not read X's type.
ModeledChoice pick_rule(const OperatorShape& s, std::int64_t width, std::int64_t cache_bytes,
                        bool zeroing_overlapped, SpmmForm form, FeatureType x_type)
{
    // A rule applies only where its kernel takes the operator's form and reads X's type (the
    // registry says which).
    const auto takes = [form, x_type](ModeledKernel k) {
        return registry_entry(k).takes(form) && registry_entry(k).reads(x_type);
    };
    if (s.rows == 0 || s.nnz == 0) {
        return {ModeledKernel::cusparse, 0, 0, "an empty operator"};
    }
    if (s.nnz > std::numeric_limits<std::int32_t>::max()) {
        return {ModeledKernel::cusparse, 0, 0,
                "past 2^31 - 1 nonzeros, where cuSPARSE runs in pieces"};
    }
    const double mean_row = static_cast<double>(s.nnz) / static_cast<double>(s.rows);
    const std::int64_t items = s.rows + s.nnz;
    if (takes(ModeledKernel::rowsplit) &&
        static_cast<double>(s.max_row_nnz) <= kRegularRowFactor * mean_row) {
        return {ModeledKernel::rowsplit, 0, 0,
                "a regular operator (longest row within 8x the mean)"};
    }
    if (takes(ModeledKernel::accel_gcn) && width <= kTinyMaxWidth && items <= kTinyItems &&
        mean_row <= kTinyMeanRow) {
        return {ModeledKernel::accel_gcn, 0, 0, "a tiny sparse operator at a narrow width"};
    }
    if (takes(ModeledKernel::rowchunk) && !zeroing_overlapped && width >= kChunkMinWidth &&
        s.nnz < kChunkMaxNnz &&
        mean_row < kChunkMaxMeanRow &&
        static_cast<double>(s.max_row_nnz) <= kChunkRowFactor * mean_row) {
        return {ModeledKernel::rowchunk, 0, 0, "a small sparse operator without an extreme hub"};
    }
    const bool mergepath = takes(ModeledKernel::mergepath);
    if (mergepath && items >= kLargeItems && width >= kLargeMinWidth) {
        if (width > kSliceWidth && x_past(s, width, kSliceCacheFactor, cache_bytes, x_type)) {
            return {ModeledKernel::mergepath, kLargeCost, kSliceWidth,
                    "a large operator whose X is past 8x the L2, at a width above 128"};
        }
        return {ModeledKernel::mergepath, kLargeCost, 0, "a large operator at a wide width"};
    }
    if (width >= kWideMinWidth && mean_row >= kWideMeanRow) {
        return {ModeledKernel::cusparse, 0, 0, "a dense operator at a very wide width"};
    }
    if (!mergepath) {
        return {ModeledKernel::cusparse, 0, 0, "the default where MergePath does not take the form"};
    }
    return {ModeledKernel::mergepath, 0, 0, "the default"};
}

ModeledChoice pick_kernel(const OperatorShape& s, std::int64_t width, std::int64_t cache_bytes,
                          bool zeroing_overlapped, SpmmForm form, FeatureType x_type)
{
    const auto& cusparse = registry_entry(ModeledKernel::cusparse);
    HALO_EXPECTS(cusparse.takes(form),
                 "cuSPARSE, the cost model's fallback, does not take "
                 "operators as ",
                 to_string(form));
    auto choice = pick_rule(s, width, cache_bytes, zeroing_overlapped, form, x_type);
    if (choice.kernel != ModeledKernel::cusparse ||
        fallback_kernel(x_type) == ModeledKernel::cusparse) {
        return choice;
    }
    // cuSPARSE does not read 16-bit X with fp32 products: MergePath, which reads every type and
    // takes every form, in its place (an empty operator runs nothing either way).
    const auto& mergepath = registry_entry(ModeledKernel::mergepath);
    HALO_EXPECTS(mergepath.takes(form) && mergepath.reads(x_type),
                 "no kernel of the cost model "
                 "reads ",
                 to_string(x_type), " X as ", to_string(form));
    if (s.nnz > std::numeric_limits<std::int32_t>::max()) {
        HALO_THROW(InputError, "an operator of ", s.nnz, " nonzeros with ", to_string(x_type),
                   " X: past 2^31 - 1 nonzeros only cuSPARSE runs (in 32-bit pieces), and it "
                   "reads fp32 X only; use fp32 activations, or row blocks below 2^31 nonzeros");
    }
    const bool empty = s.rows == 0 || s.nnz == 0;
    return {ModeledKernel::mergepath, 0, 0,
            empty ? "an empty operator" : "MergePath in cuSPARSE's place, which reads fp32 X only"};
}

}  // namespace

ModeledKernel fallback_kernel(FeatureType x_type)
{
    return registry_entry(ModeledKernel::cusparse).reads(x_type) ? ModeledKernel::cusparse
                                                                 : ModeledKernel::mergepath;
}

ModeledChoice spmm_cost_model(const OperatorShape& s, std::int64_t width, std::int64_t cache_bytes,
                              bool zeroing_overlapped, SpmmForm form, FeatureType x_type)
{
    HALO_EXPECTS(
        s.rows >= 0 && s.nnz >= 0 && s.max_row_nnz >= 0 && s.max_row_nnz <= s.nnz && s.cols >= 0,
        "operator shape: ", s.rows, " rows, ", s.cols, " columns, ", s.nnz,
        " nonzeros, longest row ", s.max_row_nnz);
    HALO_EXPECTS(width >= 1, "cost model at width ", width);
    HALO_EXPECTS(cache_bytes >= 0, "cost model with a cache of ", cache_bytes, " bytes");
    auto choice = pick_kernel(s, width, cache_bytes, zeroing_overlapped, form, x_type);
    // L2 hints wherever MergePath runs over an X (a slice of it) past kHintCacheFactor x the L2.
    choice.l2_hints = choice.kernel == ModeledKernel::mergepath &&
                      x_past(s, choice.column_slice > 0 ? choice.column_slice : width,
                             kHintCacheFactor, cache_bytes, x_type);
    return choice;
}

std::string describe(const OperatorShape& s, std::int64_t width, const ModeledChoice& c)
{
    std::string out = "rows " + std::to_string(s.rows) + ", nonzeros " + std::to_string(s.nnz) +
                      ", longest row " + std::to_string(s.max_row_nnz) + ", d = " +
                      std::to_string(width) + ": " + to_string(c.kernel);
    if (c.kernel == ModeledKernel::mergepath) {
        out += c.mergepath_cost > 0 ? " cost " + std::to_string(c.mergepath_cost)
                                    : " (per-width cost)";
    }
    if (c.column_slice > 0) {
        out += " over slices of " + std::to_string(c.column_slice) + " columns";
    }
    if (c.l2_hints) {
        out += " with L2 hints (X past 32x the L2)";
    }
    return out + " (" + c.rule + ")";
}

}  // namespace halo
