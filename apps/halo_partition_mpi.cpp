// halo-partition's distributed path: --partitioner ptscotch | dkaminpar under mpirun
// (apps/halo_partition.hpp).
#include <fmt/core.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app_common.hpp"
#include "halo/core/shard.hpp"
#include "halo/mpi/failure_watch.hpp"
#include "halo/partition/kernel_metadata_build.hpp"
#include "halo/partition_mpi/distributed_partition.hpp"
#include "halo/store/store.hpp"
#include "halo_partition.hpp"

namespace halo_partition {

void print_quality(const Options& o, const halo::PartitionQuality& quality,
                   const std::vector<std::int64_t>& interior)
{
    const bool with_interior = !interior.empty();
    fmt::print("\n{:>5} {:>12} {:>14} ", "part", "owned rows", "nonzeros");
    if (with_interior) {
        fmt::print("{:>12} ", "interior");
    }
    fmt::print("{:>12} {:>10}\n", "halo rows", "neighbours");
    for (int p = 0; p < o.parts; ++p) {
        const auto& q = quality.parts[p];
        fmt::print("{:>5} {:>12} {:>14} ", p, q.owned_rows, q.nnz);
        if (with_interior) {
            fmt::print("{:>12} ", interior[p]);
        }
        fmt::print("{:>12} {:>10}\n", q.halo_rows, q.neighbours);
    }
    fmt::print("\nedge cut {}  halo volume {}  imbalance rows {:.3f} nonzeros {:.3f}\n",
               quality.edge_cut, quality.halo_volume, quality.row_imbalance, quality.nnz_imbalance);
}

void print_summary(const Options& o, std::int64_t nodes, const std::string& partitioner,
                   std::int64_t edge_cut, double partition_seconds, double total_seconds)
{
    fmt::print("{} nodes, {} part{} ({}): edge cut {}, partition {:.2f} s, total {:.2f} s; "
               "dataset {}\n",
               nodes, o.parts, o.parts == 1 ? "" : "s", partitioner, edge_cut, partition_seconds,
               total_seconds, o.output);
    std::fflush(stdout);
}

void write_report(const Options& o, nlohmann::json report, const halo::PartitionQuality& quality,
                  const std::vector<std::int64_t>& interior,
                  const std::vector<std::int64_t>& interior_nnz, std::uintmax_t file_bytes,
                  const std::string& command)
{
    nlohmann::json parts = nlohmann::json::array();
    for (int p = 0; p < o.parts; ++p) {
        const auto& q = quality.parts[p];
        nlohmann::json part = {{"part", p},
                               {"owned_rows", q.owned_rows},
                               {"nnz", q.nnz},
                               {"halo_rows", q.halo_rows},
                               {"neighbours", q.neighbours}};
        if (!interior.empty()) {
            part["interior_rows"] = interior[p];
        }
        if (!interior_nnz.empty()) {
            part["interior_nnz"] = interior_nnz[p];
        }
        parts.push_back(std::move(part));
    }
    report["file_bytes"] = file_bytes;
    report["edge_cut"] = quality.edge_cut;
    report["halo_volume"] = quality.halo_volume;
    report["row_imbalance"] = quality.row_imbalance;
    report["nnz_imbalance"] = quality.nnz_imbalance;
    report["per_part"] = std::move(parts);
    report["command"] = command;
    halo::write_file_atomic(o.report, report.dump(2) + "\n");
}

namespace {

// The files a run writes: this rank's part file and rank 0's root (with their temporary names,
// store.hpp: "<path>.tmp-<pid>"). Removed when the run fails once writing began, so that no file
// of it that reads as a dataset is left; an earlier dataset at the path stays where the run failed
// before writing (write_distributed_dataset removes it first).
class RunOutputs {
public:
    RunOutputs(const std::string& output, int rank, int size)
    {
        const auto pid = std::to_string(::getpid());
        if (size > 1) {
            const auto part = halo::part_file_path(output, rank, size).string();
            paths_.push_back(part);
            paths_.push_back(part + ".tmp-" + pid);
        }
        if (rank == 0) {
            paths_.push_back(output);
            paths_.push_back(output + ".tmp-" + pid);
        }
    }
    void begin_writing() noexcept { writing_.store(true); }
    /// Never throws; may run on the failure watch's thread.
    void remove() noexcept
    {
        if (!writing_.exchange(false)) {
            return;
        }
        for (const auto& path : paths_) {
            std::error_code ignored;
            std::filesystem::remove(path, ignored);
        }
    }

private:
    std::vector<std::string> paths_;
    std::atomic<bool> writing_{false};
};

// The run on every rank; `outputs` learns when writing begins.
void run_distributed(const Options& o, const std::string& command, RunOutputs& outputs)
{
    using halo::app::Stopwatch;
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    Stopwatch total;
    auto step = [&](const std::string& what) {
        if (!o.quiet && rank == 0) {
            halo::app::progress_line("halo-partition", total.seconds(), what);
        }
    };
    const bool kaminpar = o.partitioner == "dkaminpar";
    halo::DistributedOptions dopt;
    dopt.method = halo::parse_partitioner(o.partitioner);
    dopt.weight_by_degree = o.balance == "nnz";
    dopt.threads = o.threads;
    dopt.kaminpar_preset = o.kaminpar_preset;
    dopt.num_parts = o.parts;
    dopt.seed = o.seed;
    dopt.imbalance = o.imbalance;
    dopt.strategy = o.scotch_strategy;
    dopt.tries = o.scotch_tries;
    dopt.refine_passes = o.refine_passes;
    dopt.chunk_entries = o.chunk_entries;
    dopt.build.symmetrize = o.symmetrize;
    dopt.build.self_loops = halo::parse_self_loops(o.self_loops);
    dopt.build.normalization = halo::parse_normalization(o.normalize);
    dopt.read.num_nodes = o.num_nodes;
    step(fmt::format("{} ranks: reading, building and partitioning {} into {} parts with {} ({})",
                     size, o.input, o.parts, kaminpar ? "dKaMinPar" : "PT-Scotch",
                     kaminpar ? "preset " + o.kaminpar_preset + ", node weights " +
                                    (dopt.weight_by_degree ? "1 + degree" : "1")
                              : o.scotch_strategy));
    const auto result = halo::partition_distributed(MPI_COMM_WORLD, o.input, dopt);
    step(fmt::format(
        "{} nodes, {} nonzeros; {} part(s) built on rank 0{}", result.num_nodes,
        result.num_nonzeros, result.shards.size(),
        kaminpar
            ? fmt::format(" (dKaMinPar: {} thread(s) per rank{})", result.threads,
                          result.threads > 1 ? "; runs may differ, --threads 1 repeats them" : "")
            : ""));
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (kaminpar && o.threads == 0 && result.threads == 1 && online > size && rank == 0) {
        fmt::print(stderr,
                   "halo-partition: note: dKaMinPar ran one thread per rank: each rank may use one "
                   "core (mpirun binds each rank to a core by default); `mpirun --bind-to none` "
                   "or --threads N gives it more of the node's {} cores\n",
                   online);
    }

    halo::DatasetInfo info;
    info.num_parts = o.parts;
    info.partitioner = o.partitioner;
    info.normalization = o.normalize;
    info.self_loops = o.self_loops;
    info.created_by = "halo-partition: " + command;
    Stopwatch write_time;
    outputs.begin_writing();
    halo::write_distributed_dataset(MPI_COMM_WORLD, o.output, info, result,
                                    [&](halo::DatasetWriter& writer, const halo::Shard& shard) {
                                        for (const auto& md : halo::build_kernel_metadata(
                                                 shard, o.normalize, o.kernel_metadata)) {
                                            writer.write_kernel_metadata(shard.part, md);
                                        }
                                    });
    // HALO_PARTITION_FAULT_INJECT=R (tests of a failure the other ranks cannot know of): rank R
    // fails here, after the dataset was written, while the others wait in the next collective.
    if (const char* fault = std::getenv("HALO_PARTITION_FAULT_INJECT");
        fault != nullptr && std::to_string(rank) == fault) {
        HALO_THROW(halo::Error, "injected fault after the write (HALO_PARTITION_FAULT_INJECT)");
    }
    auto seconds = result.seconds;
    seconds["write"] = write_time.seconds();
    seconds["total"] = total.seconds();
    // Phase times: the slowest rank's.
    for (auto& [name, value] : seconds) {
        MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    const double peak = static_cast<double>(halo::app::peak_rss_bytes());
    std::vector<double> peaks(size);
    MPI_Gather(&peak, 1, MPI_DOUBLE, peaks.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    // Rank 0's report is agreed on too: a failure to write it fails the run on every rank.
    std::uintmax_t file_size = 0;
    halo::collectively(MPI_COMM_WORLD, "writing the report", [&] {
        if (rank != 0) {
            return;
        }
        for (int r = 0; r < (size == 1 ? 0 : size); ++r) {
            std::error_code ec;
            const auto bytes =
                std::filesystem::file_size(halo::part_file_path(o.output, r, size), ec);
            file_size += ec ? 0 : bytes;
        }
        file_size += std::filesystem::file_size(o.output);
        if (o.report.empty()) {
            return;
        }
        nlohmann::json secs = nlohmann::json::object();
        for (const auto& [name, value] : seconds) {
            secs[name] = value;
        }
        const nlohmann::json report = {
            {"input", o.input},
            {"num_nodes", result.num_nodes},
            {"num_nonzeros", result.num_nonzeros},
            {"parts", o.parts},
            {"ranks", size},
            {"partitioner", o.partitioner},
            {"strategy", result.strategy},
            {"refine_passes", kaminpar ? 0 : o.refine_passes},
            {"threads_per_rank", kaminpar ? result.threads : 1},
            {"balance", o.balance},
            {"seconds", secs},
            {"peak_rss_bytes", *std::max_element(peaks.begin(), peaks.end())},
            {"peak_rss_bytes_per_rank", peaks}};
        write_report(o, report, result.quality, {}, {}, file_size, command);
    });
    if (rank != 0) {
        return;
    }
    if (o.tables) {
        print_quality(o, result.quality, {});
        std::string phases;
        for (const auto& [name, value] : seconds) {
            phases += fmt::format("{} {:.2f} s  ", name, value);
        }
        fmt::print("{}\npeak memory per rank: max {}  file {} ({} with part files)\n", phases,
                   halo::app::format_bytes(*std::max_element(peaks.begin(), peaks.end())), o.output,
                   halo::app::format_bytes(static_cast<double>(file_size)));
    }
    if (!o.quiet) {
        print_summary(o, result.num_nodes, o.partitioner, result.quality.edge_cut,
                      seconds["partition"] + seconds["refine"], seconds["total"]);
    }
}

// A failure of this rank that the others cannot know of (PT-Scotch, dKaMinPar, MPI itself): one
// line naming the rank, then every rank told (FailureWatch) and ending with status 1; MPI_Abort
// only where a rank did not answer within 20 s.
[[noreturn]] void end_failed(halo::FailureWatch& watch, RunOutputs& outputs, int rank, int size,
                             const std::string& message)
{
    // After another rank's announcement this error is a consequence of that failure, which that
    // rank reported.
    if (watch.failed_peer() < 0) {
        fmt::print(stderr, "rank {}: halo-partition: error: {}\n", rank, message);
    }
    std::fflush(stderr);
    std::fflush(stdout);
    outputs.remove();
    if (size == 1) {
        MPI_Finalize();
        std::exit(1);
    }
    if (watch.announce(std::chrono::seconds(20)) == 0) {
        std::_Exit(1);  // the others end without MPI_Finalize: no rank may wait in it
    }
    fmt::print(stderr,
               "halo-partition: a rank did not answer the failure above within 20 s: "
               "ending the job with MPI_Abort\n");
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
}

}  // namespace

int main_distributed(int* argc, char*** argv, const Options& o, const std::string& command,
                     const std::string& usage_error)
{
    // PT-Scotch's threads call MPI, and so does the failure watch's thread.
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fmt::print(stderr, "halo-partition: error: cannot start MPI\n");
        return 1;
    }
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // What every rank finds alike: rank 0 says it, every rank finalizes (no MPI_Abort).
    const auto refuse = [&](int status, const std::string& message) {
        if (rank == 0) {
            fmt::print(stderr, "halo-partition: error: {}\n", message);
        }
        MPI_Finalize();
        return status;
    };
    if (!usage_error.empty()) {
        return refuse(halo::app::kExitUsage, usage_error);
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        return refuse(1, fmt::format("the MPI library gives thread level {}; the distributed path "
                                     "needs MPI_THREAD_MULTIPLE (PT-Scotch's threads call MPI)",
                                     provided));
    }
    // MPI_COMM_WORLD keeps MPI's fatal error handler: PT-Scotch and dKaMinPar, which call MPI on
    // it, may rely on it (an MPI failure there ends the job as MPI does).
    RunOutputs outputs(o.output, rank, size);
    std::optional<halo::FailureWatch> watch;
    try {
        // Another rank failed and said so: this one removes its files and ends silently.
        watch.emplace(MPI_COMM_WORLD, [&outputs](int /*failed_rank*/) {
            outputs.remove();
            std::fflush(stdout);
            std::_Exit(1);
        });
    } catch (const std::exception& e) {
        return refuse(1, e.what());
    }
    try {
        run_distributed(o, command, outputs);
        watch.reset();  // after the last collective: no rank can announce a failure any more
        MPI_Finalize();
        return 0;
    } catch (const halo::CollectiveError& e) {
        // Every rank is here (the ranks agreed), none will announce: leave as usual.
        watch.reset();
        outputs.remove();
        if (e.reporter()) {
            if (e.every_rank()) {
                fmt::print(stderr, "halo-partition: error: {}\n", e.text());
            } else {
                fmt::print(stderr, "rank {}: halo-partition: error: {}\n", rank, e.text());
            }
        }
        MPI_Finalize();
        return 1;
    } catch (const halo::Error& e) {
        end_failed(*watch, outputs, rank, size, e.message());
    } catch (const std::exception& e) {
        end_failed(*watch, outputs, rank, size, e.what());
    }
}

namespace {

// Whether mpirun (or another PMI/PMIx launcher) started this process: its environment says so
// before MPI starts.
bool started_by_mpi_launcher()
{
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
        if (std::getenv(name) != nullptr) {
            return true;
        }
    }
    return false;
}

}  // namespace

// Parses the command line; on an error its exit status, the error said once (under mpirun by rank
// 0, and every rank exits 2).
std::optional<int> parse(CLI::App& app, int* argc, char*** argv, const Options& o)
{
    try {
        app.parse(*argc, *argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) {  // --help, --help-all
            return app.exit(e);
        }
        const auto message = fmt::format("{} (halo-partition --help lists the options)", e.what());
        if (started_by_mpi_launcher()) {
            return main_distributed(argc, argv, o, "", message);
        }
        fmt::print(stderr, "halo-partition: error: {}\n", message);
        return halo::app::kExitUsage;
    }
    return std::nullopt;
}

}  // namespace halo_partition
