// Precomputed kernel metadata (docs/FORMAT.md, "Kernel metadata"): what a sparse kernel prepares
// from one operator of one part (Accel-GCN's degree-sorted block partition, MaxK's edge groups,
// Fused3S's blocked format, the autotuner's choices), kept in the dataset under
// /parts/<p>/kernels/<kernel>/<operator> so that a rank loads it instead of recomputing (or
// re-timing) it at every start.
//
// The container is generic (named attributes and arrays); each kernel converts its own structure
// to and from it and checks what it reads. Metadata describes one sparsity pattern: the
// fingerprint of that pattern travels with it, and a reader given another operator (a dataset
// re-partitioned, a model whose layers aggregate with another operator) gets a clear mismatch
// instead of a wrong product.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "halo/core/csr.hpp"

namespace halo {

/// Operators the engine aggregates with, as far as their sparsity pattern goes: "adjacency" (the
/// stored CSR: sum, mean and mean-normalized operators share it) and "gcn" (the stored CSR plus
/// every missing diagonal entry).
inline constexpr std::string_view kernel_operator_adjacency = "adjacency";
inline constexpr std::string_view kernel_operator_gcn = "gcn";

struct KernelMetadata {
    std::string kernel;  // accel_gcn | maxk | fused3s | autotune (one path component)
    std::string op;      // kernel_operator_adjacency | kernel_operator_gcn

    // The operator it was built for (pattern_fingerprint and its shape).
    std::uint64_t fingerprint = 0;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t nnz = 0;

    std::map<std::string, std::int64_t> ints;                       // scalar attributes
    std::map<std::string, double> reals;                            // scalar attributes
    std::map<std::string, std::string> strings;                     // scalar attributes
    std::map<std::string, std::vector<std::int32_t>> int32_arrays;  // 1-D datasets
    std::map<std::string, std::vector<std::int64_t>> int64_arrays;  // 1-D datasets
    std::map<std::string, std::vector<float>> float_arrays;         // 1-D datasets

    /// Where errors say it came from ("data.h5: /parts/0/kernels/accel_gcn/gcn"); set by readers.
    std::string origin;

    /// The named attribute or array; a missing one is a halo::InputError naming `origin`.
    std::int64_t int_value(const std::string& name) const;
    const std::string& string_value(const std::string& name) const;
    const std::vector<std::int32_t>& int32_array(const std::string& name) const;
    const std::vector<std::int64_t>& int64_array(const std::string& name) const;
    const std::vector<float>& float_array(const std::string& name) const;

    /// Throws halo::InputError ("<origin>: built for an operator of 2708 rows and 13264
    /// nonzeros (fingerprint ...), given one of ...") unless `a` has the shape and fingerprint
    /// this metadata was built for.
    void expect_operator(const CsrView& a) const;
};

/// A 64-bit hash (FNV-1a's step over 64-bit words) of the shape, the row offsets and the column
/// indices of `a`, not its values: equal patterns hash equally on every machine.
std::uint64_t pattern_fingerprint(const CsrView& a);

/// Metadata naming `kernel`, operator `op` and the shape and fingerprint of `a`, nothing else yet.
KernelMetadata metadata_for_operator(const std::string& kernel, const std::string& op,
                                     const CsrView& a);

/// Checks that `name` can be a kernel or operator name in the file: [a-z0-9_]+, not empty.
void validate_metadata_name(std::string_view name, std::string_view what);

}  // namespace halo
