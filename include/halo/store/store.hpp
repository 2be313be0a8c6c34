// The HDF5 dataset (docs/FORMAT.md): one file holding every shard of a partitioned graph, read
// concurrently by the ranks. Writers write to "<path>.tmp-<pid>" and rename on success, so an
// interrupted write never leaves a file that looks valid. Readers check the format and version and
// every invariant they rely on, and name the file, part and dataset in their errors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "halo/core/feature_rows.hpp"
#include "halo/core/kernel_metadata.hpp"
#include "halo/core/shard.hpp"

namespace halo {

inline constexpr const char* dataset_format_name = "halo-dataset";
/// The "format" of a part file: some parts of a joined dataset, whose root file links them
/// (docs/FORMAT.md, "Joined datasets"). Not a dataset by itself.
inline constexpr const char* dataset_parts_format_name = "halo-dataset-parts";
/// Version 2 added the root attribute feature_type and int8 features; version-1 files (float32
/// features, no feature_type) are still read. The 16-bit feature types came later within version
/// 2: a reader that predates them refuses such a dataset by naming its feature_type.
inline constexpr int dataset_format_version = 2;

/// Root attributes of a dataset (docs/FORMAT.md, "Root").
struct DatasetInfo {
    std::string format = dataset_format_name;  // the writer always writes the current format
    int version = dataset_format_version;      // and version; these two are read back only
    std::int64_t num_nodes = 0;
    std::int64_t num_nonzeros = 0;  // sum of the parts' nnz (the global adjacency's nnz)
    std::int32_t num_parts = 0;
    std::string partitioner;       // metis | block | random (free text: recorded, not interpreted)
    std::string normalization;     // none | gcn | mean
    std::string self_loops;        // keep | drop | add
    std::int64_t feature_dim = 0;  // 0: no features
    /// "float32", "float16" / "bfloat16" (16-bit storage; the writer rounds to nearest even,
    /// read_shard widens exactly) or "int8" (per-column scale and zero point; read_shard
    /// dequantizes them).
    std::string feature_type = "float32";
    /// How each part's rows are ordered inside their group: "global" (ascending global id) or
    /// "rcm" (reverse Cuthill-McKee, halo-partition --row-order rcm); absent in older files:
    /// global. Every shard written must agree (Shard::rows_in_global_order).
    std::string row_order = "global";
    bool has_labels = false;
    bool has_values = false;  // parts store csr/values (else a pattern matrix). The writer
                              // derives it from the shards and ignores this field.
    std::string created_by;   // tool, version and command line ("HaloGNN <version>" if empty)
};

/// Streams a dataset part by part: construct, write_part for every part (any order), commit.
/// Destroying an uncommitted writer removes the temporary file. The writer checks what it is
/// given as check_dataset checks a file (each shard, its ids against `owner`, the pairwise plan
/// agreement at commit, the nonzero total), so a committed file passes check_dataset; it keeps a
/// copy of `owner` and the halo global ids of the parts written so far, never whole shards.
class DatasetWriter {
public:
    DatasetWriter(const std::filesystem::path& path, const DatasetInfo& info,
                  const std::vector<std::int32_t>& owner);
    /// A part file of a joined dataset (docs/FORMAT.md, "Joined datasets"): holds exactly the
    /// parts listed (non-empty), no /partition/owner, and format "halo-dataset-parts". Each part
    /// is checked as in a whole dataset; the pairwise plan agreement is checked by whoever joins.
    DatasetWriter(const std::filesystem::path& path, const DatasetInfo& info,
                  const std::vector<std::int32_t>& owner, const std::vector<int>& part_file_parts);
    ~DatasetWriter();
    DatasetWriter(const DatasetWriter&) = delete;
    DatasetWriter& operator=(const DatasetWriter&) = delete;

    void write_part(const Shard& shard);
    /// Adds kernel metadata to a part already written (docs/FORMAT.md, "Kernel metadata"); part
    /// of the same atomic file, so it is published by commit() with everything else.
    void write_kernel_metadata(int part, const KernelMetadata& metadata);
    /// Makes /parts/<part> an HDF5 external link to /parts/<part> of `part_file` (a committed part
    /// file; a relative name is found beside this file). A root with linked parts takes
    /// has_values from `info`, and its cross-part checks are left to check_dataset.
    void link_part(int part, const std::filesystem::path& part_file);
    /// Checks that every part was written, closes and renames into place.
    void commit();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Convenience: writes a whole dataset at once.
void write_dataset(const std::filesystem::path& path, const DatasetInfo& info,
                   const std::vector<std::int32_t>& owner, const std::vector<Shard>& shards);

/// Reads and checks the root attributes (format name, version, sizes) and that /parts holds
/// exactly the groups 0 .. num_parts - 1.
///
/// Errors of every reader: halo::IoError when the file does not exist; halo::InputError when it is
/// not an HDF5 file, not a halo dataset, of a newer version, or breaks an invariant;
/// halo::Hdf5Error when an HDF5 call fails (a truncated or damaged file). Messages start with
/// "<file>: <object>: ", e.g. "data.h5: /parts/2/csr/indices: ...".
DatasetInfo read_dataset_info(const std::filesystem::path& path);

/// /partition/owner, checked to hold num_nodes values in [0, num_parts).
std::vector<std::int32_t> read_owner(const std::filesystem::path& path);

/// Reads part `part` with its features and labels, and validates it (validate_shard) and its
/// sizes against the root attributes. Opens the file read-only, so all ranks may read one file at
/// once.
Shard read_shard(const std::filesystem::path& path, int part);

struct ShardReadOptions {
    /// If set, the features are read first, in groups of about 64 MiB, and each group is handed
    /// to this function on a thread of its own (in row order) while the reader goes on with the
    /// next group and then the graph: an upload to a device overlaps the rest of the read. A
    /// CUDA caller selects its device on that thread first. read_shard returns after the last
    /// call has returned; an exception from it fails the read with that exception.
    FeatureRows features;
};

/// read_shard with options.
Shard read_shard(const std::filesystem::path& path, int part, const ShardReadOptions& options);

/// Kernel metadata of part `part` (docs/FORMAT.md, "Kernel metadata"): the group
/// /parts/<part>/kernels/<kernel>/<op>, or nullopt when the dataset has none. Errors as for every
/// reader; a malformed group is a halo::InputError naming it.
std::optional<KernelMetadata> read_kernel_metadata(const std::filesystem::path& path, int part,
                                                   const std::string& kernel,
                                                   const std::string& op);

/// "kernel/op" for each kernel metadata group of part `part`, in name order.
std::vector<std::string> list_kernel_metadata(const std::filesystem::path& path, int part);

/// Adds or replaces kernel metadata of part `part` in a committed dataset, in place (the
/// autotuner's choices are known only after a run). The new group is written under a temporary
/// name and renamed over the old one, so readers see the old group or the new one; the space of
/// a replaced group is not reclaimed (h5repack does). The file must not be open in another
/// process (HDF5 locks it): halo-infer writes after every rank has closed it.
void store_kernel_metadata(const std::filesystem::path& path, int part,
                           const KernelMetadata& metadata);

/// Every check halo-inspect --check performs: root attributes, each part, the pairwise agreement
/// of halo plans, halo ids against /partition/owner, and the nonzero total. Throws on the first
/// violation.
void check_dataset(const std::filesystem::path& path);

}  // namespace halo
