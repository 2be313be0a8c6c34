// halo-partition's options and what its two paths share: apps/halo_partition.cpp holds main and
// the serial path (metis, kaminpar, block, random), apps/halo_partition_mpi.cpp the distributed
// path (ptscotch, dkaminpar under mpirun).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "halo/partition/partition.hpp"

namespace halo_partition {

struct Options {
    std::string input;
    int parts = 1;
    std::string partitioner = "auto";  // resolved by main (default_partitioner) before the paths
    bool symmetrize = false;
    bool no_symmetrize = false;
    std::string self_loops = "keep";
    std::string normalize = "none";
    std::string features;
    std::int64_t feature_width = 0;
    std::string labels;
    std::uint64_t seed = 1;
    double imbalance = 1.03;
    std::string balance = "nnz";
    std::string row_order = "global";
    std::int64_t num_nodes = -1;
    std::string output;
    std::string save_csr;
    std::string owner_from;  // --owner: the assignment from a file instead of a partitioner
    std::string save_owner;
    std::string report;  // --report FILE: the JSON report
    bool tables = false;  // print the tables before the summary (resolved by main)
    bool quiet = false;
    std::vector<std::string> kernel_metadata;
    std::string quantize = "none";
    std::string scotch_strategy = "auto";
    int scotch_tries = 1;
    int refine_passes = 8;
    std::int64_t chunk_entries = std::int64_t{1} << 24;
    int threads = 0;                       // kaminpar, dkaminpar (per rank); 0: automatic
    std::string kaminpar_preset = "auto";  // auto: default_kaminpar_preset
    int kaminpar_tries = 0;                // kaminpar; 0: halo::kaminpar_tries's rule
};

/// The partitioner --partitioner auto stands for, and the preset --kaminpar-preset auto stands for
/// (the measurements in docs/PARTITION.md, "Choosing the default").
std::string default_partitioner();
std::string default_kaminpar_preset();

/// The per-part table (with an interior column where `interior` has one entry a part) and the
/// quality line: both paths' tables (--report-tables).
void print_quality(const Options& o, const halo::PartitionQuality& quality,
                   const std::vector<std::int64_t>& interior);

/// Both paths' summary, the last line on standard output: nodes, parts, the partitioner, the
/// edge cut, the partition and total times, the dataset.
void print_summary(const Options& o, std::int64_t nodes, const std::string& partitioner,
                   std::int64_t edge_cut, double partition_seconds, double total_seconds);

/// --report: `report` (the path's own figures) with the quality, each part's (its interior rows
/// and their nonzeros where `interior` and `interior_nnz` have them), the dataset's bytes and the
/// command line, written to o.report.
void write_report(const Options& o, nlohmann::json report, const halo::PartitionQuality& quality,
                  const std::vector<std::int64_t>& interior,
                  const std::vector<std::int64_t>& interior_nnz, std::uintmax_t file_bytes,
                  const std::string& command);

/// --partitioner ptscotch | dkaminpar under mpirun: starts MPI, and every rank of MPI_COMM_WORLD
/// reads its slice and the ranks write one dataset together
/// (halo/partition_mpi/distributed_partition.hpp, docs/PARTITION.md). `usage_error`: what
/// check_options found ("" none), reported once, by rank 0. Errors (docs/CLI.md "Errors and exit
/// codes"): one the ranks agree on is printed once and every rank exits 1 (2 for usage); a later
/// one of one rank is one line naming it, and every rank exits 1 (FailureWatch); no dataset or part
/// file of the run is left. Returns the status.
int main_distributed(int* argc, char*** argv, const Options& o, const std::string& command,
                     const std::string& usage_error);

/// Parses the command line into the options `app` binds; on an error returns the exit status
/// with the error said once: under mpirun (the launcher's environment says so before MPI starts)
/// through main_distributed, by rank 0, every rank exiting 2; --help returns 0.
std::optional<int> parse(CLI::App& app, int* argc, char*** argv, const Options& o);

}  // namespace halo_partition
