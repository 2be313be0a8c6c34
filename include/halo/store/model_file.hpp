// The HDF5 model file (docs/FORMAT.md, "Model file"; halo_store): /layers/<i> with the weights and
// attributes of halo/core/model.hpp. Read models are checked with validate_model.
#pragma once

#include <filesystem>

#include "halo/core/model.hpp"

namespace halo {

/// Writes `model` to `path` (to a temporary name, then renamed into place).
void write_model(const std::filesystem::path& path, const Model& model);

/// Reads and checks a model file; errors name the file, the layer and the array.
Model read_model(const std::filesystem::path& path);

}  // namespace halo
