// Building a part's kernel metadata offline (halo-partition --kernel-metadata): for each kernel
// asked for and each operator pattern the engine may aggregate with (the stored adjacency, and
// the gcn operator with its added diagonal), the structure the kernel would otherwise prepare at
// every start, for the row ranges the engine runs (interior, then boundary rows).
#pragma once

#include <string>
#include <vector>

#include "halo/core/kernel_metadata.hpp"
#include "halo/core/shard.hpp"

namespace halo {

/// Kernels whose metadata can be built offline.
const std::vector<std::string>& offline_metadata_kernels();

/// The metadata of `kernels` (each one of offline_metadata_kernels()) for part `shard` of a
/// dataset whose adjacency is `normalization`-normalized, for every operator pattern that
/// applies (no gcn pattern when the dataset is mean-normalized: no gcn layer can run on it).
/// Throws halo::InputError for an unknown kernel name, naming the known ones.
std::vector<KernelMetadata> build_kernel_metadata(const Shard& shard,
                                                  const std::string& normalization,
                                                  const std::vector<std::string>& kernels);

}  // namespace halo
