// The kernel metadata groups of a part (/parts/<p>/kernels/<kernel>/<operator>), for the dataset
// writer and the public readers (store.hpp). Declare a QuietErrors before calling these.
#pragma once

#include <hdf5.h>

#include <optional>
#include <string>
#include <vector>

#include "halo/core/kernel_metadata.hpp"
#include "hdf5_util.hpp"

namespace halo::store {

/// Writes `md` under kernels/<kernel>/<op> of the part group (replacing an existing group of that
/// name through a temporary group and a rename). Throws halo::LogicError for a member name that
/// is reserved or not [a-z0-9_]+.
void write_kernel_metadata_group(hid_t part_group, const Where& part_where,
                                 const KernelMetadata& md);

/// The group kernels/<kernel>/<op> of the part, or nullopt when absent. Throws
/// halo::InputError when it is malformed (attributes missing or contradicting the path, arrays
/// of another element type).
std::optional<KernelMetadata> read_kernel_metadata_group(hid_t part_group, const Where& part_where,
                                                         const std::string& kernel,
                                                         const std::string& op);

/// "kernel/op" for every metadata group of the part (temporary groups left by a crash excluded).
std::vector<std::string> list_kernel_metadata_groups(hid_t part_group, const Where& part_where);

}  // namespace halo::store
