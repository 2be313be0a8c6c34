// The SpMM cost model's rules (include/halo/kernels_host/spmm_cost_model.hpp), no GPU: each rule on
// the shapes of the graphs it was fitted on (docs/NOTEBOOK.md "The default without stored
// choices"), the order of the rules, the edges of each threshold, the operator shape of a CSR, and
// the checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels_host/spmm_cost_model.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace {

using halo::ModeledKernel;
using halo::OperatorShape;
using halo::spmm_cost_model;

// The gcn operators (A | A^T plus self-loops) of the sweep: rows, nonzeros, longest row.
const OperatorShape kCora{2708, 13264, 169};
const OperatorShape k4elt{15606, 107362, 11};
const OperatorShape kBlogCatalog{10312, 678278, 3993};
const OperatorShape kRmat22{4194304, 132508324, 162719};
const OperatorShape kEgoTwitter{81306, 2765664, 3384};
const OperatorShape kErdosRenyi{2000000, 34000000, 42};
const OperatorShape kEmailEnron{36692, 404354, 1384};
const OperatorShape kAs22July06{22963, 119835, 2391};
const OperatorShape kAstroPh{16706, 259208, 361};

TEST(SpmmCostModel, EachRuleOnTheGraphsItWasFittedOn)
{
    // Regular operators: row-split at every width.
    for (const std::int64_t d : {7, 64, 256}) {
        EXPECT_EQ(spmm_cost_model(k4elt, d).kernel, ModeledKernel::rowsplit) << d;
        EXPECT_EQ(spmm_cost_model(kErdosRenyi, d).kernel, ModeledKernel::rowsplit) << d;
    }
    // Tiny sparse operators at narrow widths: Accel-GCN.
    EXPECT_EQ(spmm_cost_model(kCora, 7).kernel, ModeledKernel::accel_gcn);
    EXPECT_EQ(spmm_cost_model(kCora, 32).kernel, ModeledKernel::accel_gcn);
    // Small sparse operators without an extreme hub: the chunked row-split from 32 (after the
    // tiny rule: Cora from 33); not where the longest row is past 256x the mean (as-22july06),
    // nor for mean rows of 16 and more (BlogCatalog, below).
    EXPECT_EQ(spmm_cost_model(kCora, 33).kernel, ModeledKernel::rowchunk);
    for (const auto& small : {kEmailEnron, kAstroPh}) {
        EXPECT_EQ(spmm_cost_model(small, 31).kernel, ModeledKernel::mergepath);
        for (const std::int64_t d : {32, 64, 128, 256}) {
            EXPECT_EQ(spmm_cost_model(small, d).kernel, ModeledKernel::rowchunk) << d;
        }
    }
    EXPECT_EQ(spmm_cost_model(kAs22July06, 128).kernel, ModeledKernel::mergepath);
    // Where the device overlaps MergePath's zeroing with its kernel, rule 4 does not apply: the
    // same operators take MergePath at its per-width cost (the tiny rule still comes first).
    EXPECT_EQ(spmm_cost_model(kCora, 32, 0, true).kernel, ModeledKernel::accel_gcn);
    EXPECT_EQ(spmm_cost_model(kCora, 33, 0, true).kernel, ModeledKernel::mergepath);
    for (const auto& small : {kEmailEnron, kAstroPh}) {
        for (const std::int64_t d : {32, 64, 128, 256}) {
            const auto c = spmm_cost_model(small, d, 0, true);
            EXPECT_EQ(c.kernel, ModeledKernel::mergepath) << d;
            EXPECT_EQ(c.mergepath_cost, 0) << d;
            EXPECT_STREQ(c.rule, "the default") << d;
        }
    }
    // Large operators: MergePath at its per-width cost below 64, at cost 200 from 64.
    for (const auto& large : {kRmat22, kEgoTwitter}) {
        const auto narrow = spmm_cost_model(large, 32);
        EXPECT_EQ(narrow.kernel, ModeledKernel::mergepath);
        EXPECT_EQ(narrow.mergepath_cost, 0);
        for (const std::int64_t d : {64, 128, 256}) {
            const auto wide = spmm_cost_model(large, d);
            EXPECT_EQ(wide.kernel, ModeledKernel::mergepath) << d;
            EXPECT_EQ(wide.mergepath_cost, halo::kLargeCost) << d;
        }
    }
    // Dense mid-size operators at very wide widths: cuSPARSE; MergePath below.
    EXPECT_EQ(spmm_cost_model(kBlogCatalog, 191).kernel, ModeledKernel::mergepath);
    EXPECT_EQ(spmm_cost_model(kBlogCatalog, 192).kernel, ModeledKernel::cusparse);
    EXPECT_EQ(spmm_cost_model(kBlogCatalog, 7).mergepath_cost, 0);
}

TEST(SpmmCostModel, ThresholdsAndRuleOrder)
{
    // Longest row exactly 8x the mean is regular; one more is not.
    EXPECT_EQ(spmm_cost_model({1000, 4000, 32}, 64).kernel, ModeledKernel::rowsplit);
    EXPECT_NE(spmm_cost_model({1000, 4000, 33}, 64).kernel, ModeledKernel::rowsplit);
    // A regular operator is row-split even when it is tiny (rule 2 before rule 3).
    EXPECT_EQ(spmm_cost_model({1000, 4000, 8}, 16).kernel, ModeledKernel::rowsplit);
    // Tiny: at most 200000 items and a mean row of at most 8.
    EXPECT_EQ(spmm_cost_model({25000, 175000, 1000}, 16).kernel, ModeledKernel::accel_gcn);
    EXPECT_EQ(spmm_cost_model({25000, 175001, 1000}, 16).kernel, ModeledKernel::mergepath);
    EXPECT_EQ(spmm_cost_model({10000, 90000, 1000}, 16).kernel, ModeledKernel::mergepath);
    // Chunked row-split: fewer than 2^19 nonzeros, a mean row below 16, the longest row at most
    // 256x the mean, width at least 32.
    EXPECT_EQ(spmm_cost_model({40000, 524287, 3000}, 32).kernel, ModeledKernel::rowchunk);
    EXPECT_EQ(spmm_cost_model({40000, 524288, 3000}, 64).kernel, ModeledKernel::mergepath);
    EXPECT_EQ(spmm_cost_model({40000, 524287, 3000}, 31).kernel, ModeledKernel::mergepath);
    EXPECT_EQ(spmm_cost_model({10000, 159999, 1000}, 64).kernel, ModeledKernel::rowchunk);
    EXPECT_EQ(spmm_cost_model({10000, 160000, 1000}, 64).kernel, ModeledKernel::mergepath);
    EXPECT_EQ(spmm_cost_model({10000, 40000, 1024}, 64).kernel, ModeledKernel::rowchunk);
    EXPECT_EQ(spmm_cost_model({10000, 40000, 1025}, 64).kernel, ModeledKernel::mergepath);
    // Large: at least 2e6 items.
    EXPECT_EQ(spmm_cost_model({100000, 1900000, 50000}, 64).mergepath_cost, halo::kLargeCost);
    EXPECT_EQ(spmm_cost_model({100000, 1899999, 50000}, 64).mergepath_cost, 0);
    // A large dense operator at a very wide width stays MergePath (rule 4 before rule 5).
    EXPECT_EQ(spmm_cost_model({100000, 5000000, 50000}, 256).kernel, ModeledKernel::mergepath);
}

// A large operator whose X is at least 8x the cache, at a width above 128: MergePath at the large
// cost over slices of 128 columns; not at 128, not without a cache size, not for operators the
// large rule does not take (a regular one stays row-split).
TEST(SpmmCostModel, ColumnSlicesWhereXIsPastEightTimesTheCache)
{
    const std::int64_t l2 = 60 << 20;
    auto rmat22 = kRmat22;
    rmat22.cols = rmat22.rows;  // X at d = 129: 2.16 GB, 34x the cache
    for (const std::int64_t d : {129, 192, 256}) {
        const auto c = spmm_cost_model(rmat22, d, l2);
        EXPECT_EQ(c.kernel, ModeledKernel::mergepath) << d;
        EXPECT_EQ(c.mergepath_cost, halo::kLargeCost) << d;
        EXPECT_EQ(c.column_slice, halo::kSliceWidth) << d;
    }
    EXPECT_EQ(spmm_cost_model(rmat22, 128, l2).column_slice, 0);
    EXPECT_EQ(spmm_cost_model(rmat22, 256, 0).column_slice, 0);
    EXPECT_EQ(spmm_cost_model(kRmat22, 256, l2).column_slice, 0);  // columns unknown
    // The edge: cols x 256 x 4 bytes exactly 8x the cache slices, one column fewer does not.
    const std::int64_t cols = 8 * l2 / (256 * 4);
    EXPECT_EQ(spmm_cost_model({cols, 4000000, 100000, cols}, 256, l2).column_slice, 128);
    EXPECT_EQ(spmm_cost_model({cols, 4000000, 100000, cols - 1}, 256, l2).column_slice, 0);
    auto er = kErdosRenyi;
    er.cols = er.rows;
    EXPECT_EQ(spmm_cost_model(er, 256, l2).kernel, ModeledKernel::rowsplit);
    EXPECT_EQ(halo::describe(rmat22, 256, spmm_cost_model(rmat22, 256, l2)),
              "rows 4194304, nonzeros 132508324, longest row 162719, d = 256: mergepath cost 200 "
              "over slices of 128 columns with L2 hints (X past 32x the L2) (a large operator "
              "whose X is past 8x the L2, at a width above 128)");
    EXPECT_THROW(spmm_cost_model(rmat22, 256, -1), halo::LogicError);
}

// L2 hints wherever MergePath is picked and the X one launch reads (the slice's, when sliced) is
// at least 32x the cache: R-MAT 22 at d = 128 (X 2 GiB, 34x 60 MiB) and over slices of 128 at d =
// 256, not at d = 64 (17x); a large operator at a narrow width (rule 7) too; never without a
// cache size or for another kernel.
TEST(SpmmCostModel, L2HintsWhereXIsPastThirtyTwoTimesTheCache)
{
    const std::int64_t l2 = 60 << 20;
    auto rmat22 = kRmat22;
    rmat22.cols = rmat22.rows;
    EXPECT_TRUE(spmm_cost_model(rmat22, 128, l2).l2_hints);
    EXPECT_TRUE(spmm_cost_model(rmat22, 256, l2).l2_hints);
    EXPECT_TRUE(spmm_cost_model(rmat22, 1000, l2).l2_hints);  // slices of 128
    EXPECT_FALSE(spmm_cost_model(rmat22, 64, l2).l2_hints);
    EXPECT_FALSE(spmm_cost_model(rmat22, 128, 0).l2_hints);
    EXPECT_FALSE(spmm_cost_model(kRmat22, 128, l2).l2_hints);  // columns unknown
    // The edge: cols x 128 x 4 bytes exactly 32x the cache hints, one column fewer does not.
    const std::int64_t cols = 32 * l2 / (128 * 4);
    EXPECT_TRUE(spmm_cost_model({cols, 4000000, 100000, cols}, 128, l2).l2_hints);
    EXPECT_FALSE(spmm_cost_model({cols, 4000000, 100000, cols - 1}, 128, l2).l2_hints);
    // Rule 7 (a large operator below the large rule's width) with X past 32x the cache.
    const halo::OperatorShape wide{1 << 24, 200000000, 100000, 1 << 24};
    const auto narrow = spmm_cost_model(wide, 32, l2);
    EXPECT_EQ(narrow.kernel, ModeledKernel::mergepath);
    EXPECT_EQ(narrow.mergepath_cost, 0);
    EXPECT_TRUE(narrow.l2_hints);
    EXPECT_FALSE(spmm_cost_model(wide, 16, l2).l2_hints);
    // Another kernel never hints, however large X is.
    auto er = kErdosRenyi;
    er.cols = std::int64_t{1} << 30;
    EXPECT_EQ(spmm_cost_model(er, 128, l2).kernel, ModeledKernel::rowsplit);
    EXPECT_FALSE(spmm_cost_model(er, 128, l2).l2_hints);
    EXPECT_EQ(halo::describe(rmat22, 128, spmm_cost_model(rmat22, 128, l2)),
              "rows 4194304, nonzeros 132508324, longest row 162719, d = 128: mergepath cost 200 "
              "with L2 hints (X past 32x the L2) (a large operator at a wide width)");
}

TEST(SpmmCostModel, EmptyAndPast2To31AreCusparse)
{
    EXPECT_EQ(spmm_cost_model({0, 0, 0}, 64).kernel, ModeledKernel::cusparse);
    EXPECT_EQ(spmm_cost_model({100, 0, 0}, 64).kernel, ModeledKernel::cusparse);
    const std::int64_t past = std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1;
    EXPECT_EQ(spmm_cost_model({67108864, past, 100000}, 64).kernel, ModeledKernel::cusparse);
    EXPECT_EQ(spmm_cost_model({67108864, past - 1, 100000}, 64).kernel, ModeledKernel::mergepath);
}

TEST(SpmmCostModel, ShapeOfACsrAndTheDescription)
{
    halo::Csr a;
    a.num_rows = 3;
    a.num_cols = 4;
    a.indptr = {0, 2, 2, 5};
    a.indices = {0, 3, 1, 2, 3};
    const auto s = halo::operator_shape(a.view());
    EXPECT_EQ(s.rows, 3);
    EXPECT_EQ(s.nnz, 5);
    EXPECT_EQ(s.max_row_nnz, 3);
    EXPECT_EQ(s.cols, 4);
    EXPECT_EQ(halo::operator_shape(halo::Csr{}.view()).max_row_nnz, 0);
    const auto text = halo::describe(kRmat22, 64, spmm_cost_model(kRmat22, 64));
    EXPECT_EQ(text,
              "rows 4194304, nonzeros 132508324, longest row 162719, d = 64: mergepath cost 200 "
              "(a large operator at a wide width)");
}

TEST(SpmmCostModel, RejectsImpossibleShapesAndWidths)
{
    EXPECT_THROW(spmm_cost_model({10, 5, 6}, 8), halo::LogicError);   // longest row > nnz
    EXPECT_THROW(spmm_cost_model({-1, 0, 0}, 8), halo::LogicError);
    EXPECT_THROW(spmm_cost_model(kCora, 0), halo::LogicError);
}

// The model picks only kernels whose registry entry takes the operator's form (issue 48: a split
// overlap block of a gcn operator, given as its pattern and scalings, has a tiny shape for which
// the values' model picks Accel-GCN, which takes no such form). Every shape of the sweep, its
// halves and tiny blocks, every width from 1 to 300, every form, both zeroing settings.
TEST(SpmmCostModel, PicksOnlyKernelsThatTakeTheForm)
{
    const std::vector<OperatorShape> shapes{
        kCora,        k4elt,       kBlogCatalog, kRmat22,     kEgoTwitter,
        kErdosRenyi,  kEmailEnron, kAs22July06,  kAstroPh,    {2708, 600, 40, 2708},
        {100, 150, 9, 40}, {5000, 9000, 700, 12000}, {1, 1, 1, 1}, {0, 0, 0, 0}};
    const unsigned forms[] = {halo::spmm_form_values, halo::spmm_form_row_scaled,
                              halo::spmm_form_scaled, halo::spmm_form_scaled_pattern};
    for (const auto form_bits : forms) {
        const auto form = static_cast<halo::SpmmForm>(form_bits);
        for (const auto& shape : shapes) {
            for (std::int64_t d = 1; d <= 300; ++d) {
                for (const bool overlapped : {false, true}) {
                    const auto c = spmm_cost_model(shape, d, 50 << 20, overlapped, form);
                    EXPECT_TRUE(halo::registry_entry(c.kernel).takes(form))
                        << halo::to_string(form) << " " << halo::describe(shape, d, c);
                }
            }
        }
    }
    // The gcn operator's pattern and scalings on Cora at d = 7: not Accel-GCN (the values' pick),
    // the next rule that applies: MergePath where the zeroing overlaps, else the same default.
    EXPECT_EQ(spmm_cost_model(kCora, 7).kernel, ModeledKernel::accel_gcn);
    EXPECT_EQ(spmm_cost_model(kCora, 7, 0, true, halo::spmm_form_scaled).kernel,
              ModeledKernel::mergepath);
    // Row-scaled (mean) and pattern operators: Accel-GCN takes them, so its rule stands.
    EXPECT_EQ(spmm_cost_model(kCora, 7, 0, true, halo::spmm_form_row_scaled).kernel,
              ModeledKernel::accel_gcn);
    EXPECT_EQ(spmm_cost_model(kCora, 7, 0, true, halo::spmm_form_scaled_pattern).kernel,
              ModeledKernel::accel_gcn);
}

// One table: every kernel the model names is a registry kernel that halo-infer --spmm accepts,
// and each form's factory exists where the registry says the form is taken.
TEST(SpmmCostModel, ItsKernelsAreRegistryKernels)
{
    for (const auto k : {ModeledKernel::cusparse, ModeledKernel::accel_gcn,
                         ModeledKernel::mergepath, ModeledKernel::rowsplit,
                         ModeledKernel::rowchunk}) {
        const auto& entry = halo::registry_entry(k);
        EXPECT_EQ(entry.name, halo::to_string(k));
        EXPECT_TRUE(entry.exact) << entry.name;
        EXPECT_TRUE(entry.takes(halo::spmm_form_values)) << entry.name;
    }
    for (const auto& kernel : halo::spmm_kernels()) {
        EXPECT_TRUE(kernel.takes(halo::spmm_form_values)) << kernel.name;
        EXPECT_EQ(kernel.forms & ~halo::spmm_forms_all, 0u) << kernel.name;
#ifdef HALO_HAVE_CUDA
        const bool scaled = (kernel.forms & ~unsigned{halo::spmm_form_values}) != 0;
        EXPECT_EQ(scaled, kernel.make_scaled != nullptr) << kernel.name;
#endif
    }
    EXPECT_TRUE(halo::registry_entry(ModeledKernel::cusparse).forms == halo::spmm_forms_all);
    EXPECT_EQ(halo::spmm_form(nullptr, false), halo::spmm_form_values);
    halo::OperatorScaling mean;
    mean.row = {1.0f};
    EXPECT_EQ(halo::spmm_form(&mean, true), halo::spmm_form_row_scaled);
    halo::OperatorScaling gcn = mean;
    gcn.col = {1.0f};
    EXPECT_EQ(halo::spmm_form(&gcn, false), halo::spmm_form_scaled);
    EXPECT_EQ(halo::spmm_form(&gcn, true), halo::spmm_form_scaled_pattern);
}

// 16-bit X (issue 53's activations): the rules choose among the kernels that read the type; X's
// bytes count 2 an element; cuSPARSE's rules (6, the form fallback) give MergePath, and past 2^31
// nonzeros nothing reads 16-bit X: an error naming the nonzeros and the type.
TEST(SpmmCostModel, SixteenBitXTakesKernelsThatReadIt)
{
    using halo::FeatureType;
    const std::int64_t l2 = 60 << 20;
    for (const auto type : {FeatureType::fp16, FeatureType::bf16}) {
        SCOPED_TRACE(halo::to_string(type));
        // Rules whose kernels read 16-bit X decide as for fp32.
        for (const std::int64_t d : {7, 32, 33, 64, 128, 256}) {
            for (const auto& shape : {kCora, k4elt, kBlogCatalog, kRmat22, kEgoTwitter, kErdosRenyi,
                                      kEmailEnron, kAs22July06, kAstroPh}) {
                const auto fp32 = spmm_cost_model(shape, d);
                const auto lowp = spmm_cost_model(shape, d, 0, false, halo::spmm_form_values, type);
                EXPECT_TRUE(halo::registry_entry(lowp.kernel).reads(type))
                    << halo::describe(shape, d, lowp);
                if (fp32.kernel != ModeledKernel::cusparse) {
                    EXPECT_EQ(lowp.kernel, fp32.kernel) << halo::describe(shape, d, lowp);
                } else {
                    EXPECT_EQ(lowp.kernel, ModeledKernel::mergepath)
                        << halo::describe(shape, d, lowp);
                    EXPECT_NE(std::string(lowp.rule).find("cuSPARSE's place"), std::string::npos)
                        << lowp.rule;
                }
            }
        }
        // Rule 6 (BlogCatalog at d = 256: cuSPARSE for fp32) is MergePath for 16-bit X.
        EXPECT_EQ(spmm_cost_model(kBlogCatalog, 256).kernel, ModeledKernel::cusparse);
        EXPECT_EQ(spmm_cost_model(kBlogCatalog, 256, 0, false, halo::spmm_form_values, type).kernel,
                  ModeledKernel::mergepath);
        // Column slices and hints count 2 bytes an element: X of cols x 256 at exactly 8x the
        // cache in fp32 is 4x in 16 bits, no slices; twice the columns slice.
        const std::int64_t cols = 8 * l2 / (256 * 4);
        const OperatorShape edge{cols, 4000000, 100000, cols};
        EXPECT_EQ(spmm_cost_model(edge, 256, l2).column_slice, 128);
        EXPECT_EQ(spmm_cost_model(edge, 256, l2, false, halo::spmm_form_values, type).column_slice,
                  0);
        const OperatorShape twice{2 * cols, 4000000, 100000, 2 * cols};
        EXPECT_EQ(spmm_cost_model(twice, 256, l2, false, halo::spmm_form_values, type).column_slice,
                  128);
        const std::int64_t hint_cols = 32 * l2 / (128 * 4);
        const OperatorShape hint_edge{hint_cols, 4000000, 100000, hint_cols};
        EXPECT_TRUE(spmm_cost_model(hint_edge, 128, l2).l2_hints);
        EXPECT_FALSE(
            spmm_cost_model(hint_edge, 128, l2, false, halo::spmm_form_values, type).l2_hints);
        // An empty operator runs nothing; MergePath stands in for cuSPARSE.
        EXPECT_EQ(spmm_cost_model({100, 0, 0}, 64, 0, false, halo::spmm_form_values, type).kernel,
                  ModeledKernel::mergepath);
        // Past 2^31 - 1 nonzeros only cuSPARSE runs, and it reads fp32 only.
        const std::int64_t past = std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1;
        try {
            spmm_cost_model({67108864, past, 100000}, 64, 0, false, halo::spmm_form_values, type);
            ADD_FAILURE() << "no error past 2^31 nonzeros";
        } catch (const halo::InputError& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(std::to_string(past)), std::string::npos) << what;
            EXPECT_NE(what.find(halo::to_string(type)), std::string::npos) << what;
        }
    }
}

// The registry says which kernels read 16-bit X: cuSPARSE and the approximate AES read fp32 only;
// MergePath (the cost model's stand-in for cuSPARSE) reads every type and takes every form.
TEST(SpmmCostModel, RegistryElementTypes)
{
    using halo::FeatureType;
    EXPECT_FALSE(halo::registry_entry(ModeledKernel::cusparse).reads(FeatureType::bf16));
    EXPECT_TRUE(halo::registry_entry(ModeledKernel::cusparse).reads(FeatureType::fp32));
    for (const auto type : {FeatureType::fp32, FeatureType::fp16, FeatureType::bf16}) {
        EXPECT_TRUE(halo::registry_entry(ModeledKernel::mergepath).reads(type));
        EXPECT_EQ(halo::registry_entry(ModeledKernel::mergepath).forms, halo::spmm_forms_all);
    }
    for (const auto* k : halo::spmm_kernels(halo::spmm_use_infer)) {
        EXPECT_TRUE(k->reads(FeatureType::fp32)) << k->name;
        if (!k->exact) {
            EXPECT_FALSE(k->reads(FeatureType::bf16)) << k->name;
        }
    }
}

}  // namespace
