// halo-partition: graph file (or generator spec) -> global CSR -> partition -> shards -> dataset.
#include "halo_partition.hpp"

#include <fmt/core.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app_common.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/core/progress.hpp"
#include "halo/core/shard.hpp"
#include "halo/partition/kernel_metadata_build.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo/partition_mpi/distributed_partition.hpp"
#include "halo/quantize/quantize.hpp"
#include "halo/store/store.hpp"

namespace {

using halo_partition::Options;

// True when `path` starts with the HDF5 signature (a dataset rather than a text part file).
bool has_hdf5_signature(const std::string& path)
{
    static constexpr char signature[] = "\x89HDF\r\n\x1a\n";
    std::ifstream in(path, std::ios::binary);
    char head[8] = {};
    return in.read(head, sizeof(head)) && std::equal(head, head + 8, signature);
}

// --owner FILE: the owner array of a dataset (any partitioner's; its name is returned in
// `partitioner`) or of a gpmetis-style part file ("file"), checked against the graph.
std::vector<std::int32_t> read_owner_from(const Options& o, std::int64_t num_nodes,
                                          std::string& partitioner)
{
    if (!has_hdf5_signature(o.owner_from)) {
        partitioner = "file";
        return halo::read_part_file(o.owner_from, num_nodes, o.parts);
    }
    const auto source = halo::read_dataset_info(o.owner_from);
    if (source.num_nodes != num_nodes) {
        HALO_THROW(halo::InputError, o.owner_from, ": the dataset has ", source.num_nodes,
                   " nodes, but the graph has ", num_nodes, " (--owner takes the assignment of "
                   "the same graph)");
    }
    if (source.num_parts != o.parts) {
        HALO_THROW(halo::InputError, o.owner_from, ": the dataset has ", source.num_parts,
                   " parts, but --parts is ", o.parts);
    }
    partitioner = source.partitioner;
    return halo::read_owner(o.owner_from);
}

bool is_generator_spec(const std::string& input)
{
    return input.rfind("rmat:", 0) == 0 || input.rfind("er:", 0) == 0;
}

// The combinations of options that no path takes: the error text, or empty.
std::string check_options(const Options& o, bool owner_given)
{
    const auto& p = o.partitioner;
    const bool kaminpar = p == "kaminpar" || p == "dkaminpar";
    const bool distributed = p == "ptscotch" || p == "dkaminpar";
    if (kaminpar && !halo::kaminpar_available()) {
        return "--partitioner " + p + " is not in this build of halo-partition (configured with "
               "-DHALO_WITH_KAMINPAR=OFF); use metis, or ptscotch under mpirun";
    }
    if (o.balance == "rows+nnz" && (p != "metis" || owner_given)) {
        return "--balance rows+nnz is a METIS option (two constraints; not with --partitioner " +
               p + (owner_given ? " or --owner" : "") +
               "); KaMinPar balances one weight per node: --balance nnz (1 + degree) or rows (1)";
    }
    if (o.balance == "rows" && (!(kaminpar || p == "metis") || owner_given)) {
        return "--balance rows is for metis, kaminpar and dkaminpar (not with --partitioner " + p +
               (owner_given ? " or --owner" : "") + ")";
    }
    if (o.kaminpar_tries != 0 && p != "kaminpar") {
        return "--kaminpar-tries is for --partitioner kaminpar (not " + p + ")";
    }
    if (!kaminpar && (o.threads != 0 || o.kaminpar_preset != "auto")) {
        return "--threads and --kaminpar-preset are KaMinPar's options (not with --partitioner " +
               p + ")";
    }
    if (o.row_order != "global" && distributed) {
        return "--row-order " + o.row_order + " is not available with --partitioner " + p +
               " yet (its shards are built by every rank)";
    }
    if (owner_given && distributed) {
        return "--owner replaces the partitioner; it does not go with --partitioner " + p;
    }
    if (distributed && (!o.features.empty() || !o.labels.empty() || o.quantize != "none" ||
                        !o.save_csr.empty() || !o.save_owner.empty())) {
        return "--partitioner " + p +
               " does not take --features, --labels, --quantize, --save-csr or --save-owner "
               "yet; partition with metis or kaminpar, or add node data in a later step";
    }
    return {};
}

// Steps 1 and 2 of run(): the edge list (read or generated), then the global CSR. `symmetrized`:
// whether build_csr made the pattern symmetric.
halo::Csr read_and_build(const Options& o, const halo::ProgressLine& step, bool& symmetrized)
{
    // 1. The edge list.
    halo::EdgeList edges;
    if (is_generator_spec(o.input)) {
        const auto spec = halo::parse_graph_spec(o.input);
        step("generating " + halo::to_string(spec));
        edges = halo::generate(spec);
    } else {
        const auto format = halo::detect_graph_format(o.input);
        step(fmt::format("reading {} ({})", o.input, halo::to_string(format)));
        halo::GraphReadOptions read_options;
        read_options.num_nodes = o.num_nodes;
        if (!o.quiet) {
            read_options.progress = step;
        }
        edges = halo::read_graph(o.input, read_options);
    }
    step(fmt::format("{} nodes, {} edges", edges.num_nodes, edges.num_edges()));

    // 2. The global CSR.
    // As in halo-bench: generated edge lists are directed draws and GNN adjacencies undirected,
    // so generated graphs are symmetrized unless asked not to be; files are taken as they are.
    const bool generated = is_generator_spec(o.input);
    const bool symmetrize = o.symmetrize || (generated && !o.no_symmetrize);
    halo::BuildOptions build;
    build.symmetrize = symmetrize;
    build.self_loops = halo::parse_self_loops(o.self_loops);
    build.normalization = halo::parse_normalization(o.normalize);
    if (!o.quiet) {
        build.progress = step;
    }
    step("building the CSR (symmetrize " + std::string(symmetrize ? "yes" : "no") +
         (generated && !o.symmetrize && !o.no_symmetrize
              ? " (default for generated graphs; --no-symmetrize turns it off)"
              : "") +
         ", self-loops " + o.self_loops + ", normalize " + o.normalize + ")");
    auto csr = halo::build_csr(edges, build);
    edges = {};  // the CSR holds everything from here on
    step(fmt::format("CSR: {} rows, {} nonzeros, max row {}", csr.num_rows, csr.nnz(),
                     halo::max_row_nnz(csr.view())));
    symmetrized = symmetrize;
    return csr;
}

// Step 4 of run(): the parts' assignment, from the partitioner or from --owner (which also names
// the partitioner that made it, in `partitioner`).
std::vector<std::int32_t> assign_parts(const Options& o, const halo::Csr& csr, bool symmetrize,
                                       std::string& partitioner, const halo::ProgressLine& step)
{
    // 4. Partition (or take the assignment from --owner).
    std::vector<std::int32_t> owner;
    if (!o.owner_from.empty()) {
        step(fmt::format("reading the {}-part assignment from {}", o.parts, o.owner_from));
        owner = read_owner_from(o, csr.num_rows, partitioner);
    } else {
        halo::PartitionOptions popt;
        popt.method = halo::parse_partitioner(o.partitioner);
        popt.num_parts = o.parts;
        popt.seed = o.seed;
        popt.imbalance = o.imbalance;
        popt.balance_rows = o.balance == "rows+nnz";
        popt.weight_by_degree = o.balance != "rows";
        popt.threads = o.threads;
        popt.kaminpar_preset = o.kaminpar_preset;
        popt.kaminpar_tries = o.kaminpar_tries;
        popt.symmetric = symmetrize;  // build_csr made it so: KaMinPar takes the pattern as it is
        step(fmt::format("partitioning into {} parts with {}{}", o.parts, o.partitioner,
                         popt.method == halo::Partitioner::kaminpar
                             ? fmt::format(" (preset {}, {} tr{}, {} thread(s){}, node weights {})",
                                           o.kaminpar_preset,
                                           halo::kaminpar_tries(o.kaminpar_tries, csr.nnz()),
                                           halo::kaminpar_tries(o.kaminpar_tries, csr.nnz()) > 1
                                               ? "ies"
                                               : "y",
                                           halo::kaminpar_threads(o.threads),
                                           halo::kaminpar_threads(o.threads) > 1
                                               ? ": runs may differ, --threads 1 repeats them"
                                               : "",
                                           popt.weight_by_degree ? "the rows' nonzeros" : "1")
                             : ""));
        owner = halo::partition_graph(csr.view(), popt);
    }
    return owner;
}

// --quantize: the features' stored type in `info`, and for int8 the quantized matrix of all
// nodes (empty otherwise).
halo::QuantizedMatrix quantize_features(const Options& o, const halo::DenseMatrix& features,
                                        halo::DatasetInfo& info, const halo::ProgressLine& step)
{
    // --quantize int8: one scale and zero point per column over all nodes (docs/FORMAT.md), so
    // every part stores its rows with the same parameters.
    halo::QuantizedMatrix quantized;
    if (o.quantize == "int8") {
        if (features.cols == 0) {
            HALO_THROW(halo::InputError, "--quantize int8 needs --features");
        }
        step("quantizing features to int8 (per-column scale and zero point)");
        quantized = halo::quantize_columns(
            halo::dense_view<const float>(features.values.data(), features.rows, features.cols),
            o.features.c_str());
        info.feature_type = "int8";
    } else if (o.quantize != "none") {
        // fp16 / bf16: the writer rounds each part's rows; a value beyond the type's range is
        // found here first, over all nodes, before anything is written.
        if (features.cols == 0) {
            HALO_THROW(halo::InputError, "--quantize ", o.quantize, " needs --features");
        }
        const auto type = halo::parse_feature_type(o.quantize);
        step("checking features against " + o.quantize + "'s range");
        const auto bad = halo::first_out_of_range(features.values, type);
        if (bad >= 0) {
            HALO_THROW(halo::InputError, o.features, ": feature ",
                       features.values[static_cast<std::size_t>(bad)], " of node ",
                       bad / features.cols, " (column ", bad % features.cols, ") is beyond ",
                       o.quantize, "'s range (largest ",
                       type == halo::FeatureType::fp16 ? "65504" : "3.39e38",
                       "); use --quantize bf16 (fp32's range) or none");
        }
        info.feature_type = halo::stored_feature_type_name(type);
    }
    return quantized;
}

// Step 5 of run(): every part's shard written (one at a time) and the dataset committed; each
// part's interior rows and the nonzeros of those rows (what a rank can aggregate while its halo
// rows are on their way) in `interior` and `interior_nnz`.
void write_shards(const Options& o, const halo::Csr& csr, const std::vector<std::int32_t>& owner,
                  const halo::DatasetInfo& info, const std::vector<std::int64_t>& order_keys,
                  const halo::DenseMatrix& features, const std::vector<std::int32_t>& labels,
                  const halo::QuantizedMatrix& quantized, const halo::ProgressLine& step,
                  std::vector<std::int64_t>& interior, std::vector<std::int64_t>& interior_nnz)
{
    halo::DatasetWriter writer(o.output, info, owner);
    // The layout (every node's part, class and local row) once for all parts.
    halo::ShardBuilder builder(csr, owner, o.parts, order_keys.empty() ? nullptr : &order_keys);
    // Parts past the first few: a line every ~10% with the time left, not one per part.
    halo::ProgressMeter written(o.quiet ? halo::ProgressLine() : step, "writing parts", o.parts,
                                "parts", 1.0);
    for (int p = 0; p < o.parts; ++p) {
        auto shard = builder.build(p);
        halo::attach_node_data(shard, features.values, features.cols, labels);
        if (!quantized.scale.empty()) {
            const auto dim = quantized.cols;
            shard.features_int8.resize(static_cast<std::size_t>(shard.num_owned * dim));
            for (std::int64_t i = 0; i < shard.num_owned; ++i) {
                std::copy_n(quantized.data.data() + shard.global_ids[i] * dim, dim,
                            shard.features_int8.data() + i * dim);
            }
            shard.feature_scale = quantized.scale;
            shard.feature_zero_point = quantized.zero_point;
        }
        interior[p] = shard.num_interior;
        interior_nnz[p] = shard.csr.indptr[static_cast<std::size_t>(shard.num_interior)];
        writer.write_part(shard);
        for (const auto& md : halo::build_kernel_metadata(shard, o.normalize, o.kernel_metadata)) {
            writer.write_kernel_metadata(p, md);
        }
        if (p < 4 || p + 1 == o.parts) {
            step(fmt::format("part {}/{} written ({} rows, {} halo{})", p + 1, o.parts,
                             shard.num_owned, shard.num_halo,
                             o.kernel_metadata.empty() ? "" : ", kernel metadata"));
        }
        written.advance(1.0);
    }
    writer.commit();
}

// The run's part of the --report JSON (write_report adds the quality and the parts).
nlohmann::json run_json(const Options& o, const halo::Csr& csr, const std::string& partitioner,
                        double graph_seconds, double partition_seconds, double total_seconds)
{
    return {{"input", o.input},
                                   {"num_nodes", csr.num_rows},
                                   {"num_nonzeros", csr.nnz()},
                                   {"parts", o.parts},
                                   {"partitioner", partitioner},
                                   {"owner_from", o.owner_from},
                                   {"balance", o.balance},
                                   {"kaminpar_preset", partitioner == "kaminpar"
                                                           ? o.kaminpar_preset
                                                           : std::string()},
                                   {"kaminpar_tries",
                                    partitioner == "kaminpar"
                                        ? halo::kaminpar_tries(o.kaminpar_tries, csr.nnz())
                                        : 0},
                                   {"threads", partitioner == "kaminpar"
                                                   ? halo::kaminpar_threads(o.threads)
                                                   : 1},
                                   {"row_order", o.row_order},
                                   {"seconds",
                                    {{"read_and_build", graph_seconds},
                                     {"partition", partition_seconds},
                                     {"total", total_seconds}}},
                                   {"peak_rss_bytes", halo::app::peak_rss_bytes()}};
}

int run(const Options& o, const std::string& command)
{
    using halo::app::Stopwatch;
    Stopwatch total;
    auto step = [&](const std::string& what) {
        if (!o.quiet) {
            halo::app::progress_line("halo-partition", total.seconds(), what);
        }
    };

    bool symmetrize = false;
    const auto csr = read_and_build(o, step, symmetrize);
    const double graph_seconds = total.seconds();
    if (!o.save_csr.empty()) {
        halo::write_binary_csr(o.save_csr, csr);
        step("wrote " + o.save_csr);
    }

    // 3. Node data, checked against the graph before any partitioning work.
    halo::DenseMatrix features;
    if (!o.features.empty()) {
        step("reading features " + o.features);
        features = halo::read_features(o.features, o.feature_width);
        if (features.rows != csr.num_rows) {
            HALO_THROW(halo::InputError, o.features, ": ", features.rows,
                       " feature rows, but the graph has ", csr.num_rows, " nodes");
        }
    }
    std::vector<std::int32_t> labels;
    if (!o.labels.empty()) {
        labels = halo::read_labels(o.labels);
        if (static_cast<std::int64_t>(labels.size()) != csr.num_rows) {
            HALO_THROW(halo::InputError, o.labels, ": ", labels.size(),
                       " labels, but the graph has ", csr.num_rows, " nodes");
        }
    }

    // 4. Partition (or take the assignment from --owner).
    std::string partitioner = o.partitioner;
    Stopwatch partition_time;
    const auto owner = assign_parts(o, csr, symmetrize, partitioner, step);
    const double partition_seconds = partition_time.seconds();
    if (!o.save_owner.empty()) {
        halo::write_part_file(o.save_owner, owner);
        step("wrote " + o.save_owner);
    }
    const auto quality = halo::partition_quality(csr.view(), owner, o.parts);

    // 5. Shards, written one at a time.
    halo::DatasetInfo info;
    info.num_nodes = csr.num_rows;
    info.num_nonzeros = csr.nnz();
    info.num_parts = o.parts;
    info.partitioner = partitioner;
    info.normalization = o.normalize;
    info.self_loops = o.self_loops;
    info.feature_dim = features.cols;
    const auto quantized = quantize_features(o, features, info, step);
    info.has_labels = !labels.empty();
    info.created_by = "halo-partition: " + command;
    // --row-order rcm: every part's rows reordered for locality, computed once for all parts
    // (a part's halo columns follow its peers' local rows).
    std::vector<std::int64_t> order_keys;
    if (o.row_order != "global") {
        step("ordering each part's rows (" + o.row_order + ")");
        order_keys = halo::row_order_keys(csr, owner, o.parts, halo::parse_row_order(o.row_order));
        info.row_order = o.row_order;
    }
    std::vector<std::int64_t> interior(o.parts, 0);
    std::vector<std::int64_t> interior_nnz(o.parts, 0);
    write_shards(o, csr, owner, info, order_keys, features, labels, quantized, step, interior,
                 interior_nnz);
    const auto file_size = std::filesystem::file_size(o.output);
    const double total_seconds = total.seconds();

    // 6. The tables (--report-tables), the JSON report, the summary last.
    if (o.tables) {
        print_quality(o, quality, interior);
        fmt::print("read and build {:.2f} s  partition {:.2f} s  total {:.2f} s  peak memory {}  "
                   "file {} ({})\n",
                   graph_seconds, partition_seconds, total_seconds,
                   halo::app::format_bytes(halo::app::peak_rss_bytes()), o.output,
                   halo::app::format_bytes(static_cast<double>(file_size)));
    }
    if (!o.report.empty()) {
        write_report(o, run_json(o, csr, partitioner, graph_seconds, partition_seconds,
                                 total_seconds),
                     quality, interior, interior_nnz, file_size, command);
    }
    if (!o.quiet) {
        print_summary(o, csr.num_rows, partitioner, quality.edge_cut, partition_seconds,
                      total_seconds);
    }
    return 0;
}

}  // namespace

namespace halo_partition {

std::string default_partitioner()
{
    return halo::kaminpar_available() ? "kaminpar" : "metis";
}

std::string default_kaminpar_preset()
{
    return "default";  // both partitioners have one of this name
}

}  // namespace halo_partition

namespace {

// halo-partition's options, bound to `o` (and --report-tables / --no-report-tables to `tables`
// and `no_tables`); returns --owner's option, whose count says whether it was given.
CLI::Option* add_options(CLI::App& app, Options& o, bool& tables, bool& no_tables)
{
    app.add_option("input", o.input,
                   "graph: edge list (.el, .txt, optionally .gz), Matrix Market (.mtx), HaloGNN "
                   "binary CSR (.hcsr), or a generator: rmat:SCALE:EF[:SEED], er:N:M[:SEED]")
        ->required();
    app.add_option("-p,--parts", o.parts, "number of parts (= ranks that will run it)")
        ->check(CLI::Range(1, 1 << 20))
        ->required();
    app.add_option("--partitioner", o.partitioner,
                   "auto (" + halo_partition::default_partitioner() +
                       " in this build) | metis | kaminpar (shared memory, all cores, 64-bit edge "
                       "ids) | dkaminpar (distributed: run under mpirun, each rank reads its "
                       "slice) | ptscotch (64-bit, distributed: run under mpirun, each rank "
                       "reads its slice) | block | random")
        ->check(CLI::IsMember({"auto", "metis", "kaminpar", "dkaminpar", "ptscotch", "block",
                               "random"}))
        ->capture_default_str();
    halo::app::add_graph_build_options(
        app, o.symmetrize, o.no_symmetrize, o.self_loops, o.normalize,
        "use A | A^T (undirected; the default for generated graphs)",
        "none | gcn | mean (none: halo-infer derives each layer's operator)");
    app.add_option("--features", o.features,
                   "node features: .npy, raw float32 (.bin/.f32, needs --feature-width) or COO "
                   "text (.coo.txt[.gz])");
    app.add_option("--feature-width", o.feature_width, "row width of raw float32 features");
    app.add_option("--labels", o.labels, "one integer label per line (-1: none)");
    app.add_option("--seed", o.seed, "seed for METIS, the random partitioner and generators")
        ->capture_default_str();
    app.add_option("--imbalance", o.imbalance, "METIS load imbalance tolerance (max/mean)")
        ->check(CLI::Range(1.0, 10.0))
        ->capture_default_str();
    app.add_option("--balance", o.balance,
                   "what the partitioner balances across parts: nnz (one weight per node, 1 + "
                   "degree) | rows (weight 1; metis, kaminpar, dkaminpar) | rows+nnz (METIS only: "
                   "two constraints, rows and 1 + degree, each within --imbalance)")
        ->check(CLI::IsMember({"nnz", "rows", "rows+nnz"}))
        ->capture_default_str();
    app.add_option("--row-order", o.row_order,
                   "order of each part's rows inside its interior and boundary groups: global "
                   "(ascending global id) | rcm (reverse Cuthill-McKee over the part's own "
                   "edges) | rabbit (Rabbit order: communities of the part's own edges, each a "
                   "range of rows), for locality of the SpMM's reads; docs/PARTITION.md")
        ->check(CLI::IsMember({"global", "rcm", "rabbit"}))
        ->capture_default_str();
    app.add_option("--num-nodes", o.num_nodes, "node count (ids must be below it)");
    app.add_option("--save-csr", o.save_csr, "also write the global CSR as binary .hcsr");
    auto* owner_option =
        app.add_option("--owner", o.owner_from,
                       "take the assignment instead of partitioning: a dataset of the same graph "
                       "(its /partition/owner) or one part id per line in node order (gpmetis's "
                       "graph.part.P)")
            ->check(CLI::ExistingFile);
    app.add_option("--save-owner", o.save_owner,
                   "also write the assignment, one part id per line (what --owner reads)");
    app.add_option("-o,--output", o.output, "dataset file to write (.h5)")->required();
    std::string known;
    for (const auto& k : halo::offline_metadata_kernels()) {
        known += (known.empty() ? "" : ", ") + k;
    }
    app.add_option("--kernel-metadata", o.kernel_metadata,
                   "also store these kernels' metadata per part, comma-separated (known: " + known +
                       "); halo-infer loads it instead of rebuilding it")
        ->delimiter(',')
        ->check(CLI::IsMember(halo::offline_metadata_kernels()));
    app.add_option("--quantize", o.quantize,
                   "store the features as: none (float32) | fp16 | bf16 (16-bit floats, "
                   "rounded to nearest even, 2x smaller) | int8 (per-column scale and zero "
                   "point, 4x smaller; docs/FORMAT.md)")
        ->check(CLI::IsMember({"none", "fp16", "bf16", "int8"}))
        ->capture_default_str();
    app.add_option("--report", o.report,
                   "write the report (times, memory, quality, every part's rows, nonzeros and "
                   "halo) as JSON");
    auto* tables_flag = app.add_flag("--report-tables", tables,
                                     "print the per-part table, the quality and the times before "
                                     "the summary (default where standard output is a terminal; "
                                     "--report FILE holds them always)");
    app.add_flag("--no-report-tables", no_tables, "no tables, only the summary line")
        ->excludes(tables_flag);
    app.add_option("--scotch-strategy", o.scotch_strategy,
                   "PT-Scotch strategy: auto (tuned up to 2^24 symmetrized entries, quality "
                   "above) | tuned (quality and two variants, the best kept) | quality | default "
                   "| speed | balance | scalability")
        ->check(CLI::IsMember(
            {"auto", "tuned", "quality", "default", "speed", "balance", "scalability"}))
        ->capture_default_str();
    app.add_option("--scotch-tries", o.scotch_tries,
                   "PT-Scotch runs with seeds seed .. seed + N - 1 and keeps the smallest cut")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    app.add_option("--refine-passes", o.refine_passes,
                   "ptscotch: passes of the distributed greedy k-way refinement after PT-Scotch "
                   "(0: none)")
        ->check(CLI::Range(0, 1000))
        ->capture_default_str();
    app.add_option("--chunk-entries", o.chunk_entries,
                   "ptscotch: entries a rank sends per MPI_Alltoallv round (bounds the buffers)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 28))
        ->capture_default_str();
    app.add_option("--threads", o.threads,
                   "kaminpar: threads (0: OMP_NUM_THREADS, else every core this process may use); "
                   "dkaminpar: threads per rank (0: the node's cores shared among its ranks, at "
                   "most OMP_NUM_THREADS)")
        ->check(CLI::Range(0, 4096))
        ->capture_default_str();
    app.add_option("--kaminpar-preset", o.kaminpar_preset,
                   "KaMinPar's configuration: auto (" + halo_partition::default_kaminpar_preset() +
                       ") | default | eco | strong | fast | ... (kaminpar), default | strong | "
                       "... (dkaminpar); an unknown name lists the known ones")
        ->capture_default_str();
    app.add_option("--kaminpar-tries", o.kaminpar_tries,
                   "kaminpar: runs with seeds --seed, --seed + 1, ..., the smallest cut kept (0: 4 "
                   "up to 2^24 nonzeros, else 1)")
        ->check(CLI::Range(0, 64))
        ->capture_default_str();
    app.add_flag("-q,--quiet", o.quiet, "no progress lines, no tables, no summary: errors only");
    return owner_option;
}

}  // namespace

int main(int argc, char** argv)
{
    halo::app::fail_writes_past_file_size_limit();
    Options o;
    CLI::App app{
        "halo-partition: partition a graph into one shard per rank and write the HDF5 "
        "dataset that halo-infer reads"};
    bool tables = false;
    bool no_tables = false;
    auto* owner_option = add_options(app, o, tables, no_tables);
    if (const auto exit_code = halo_partition::parse(app, &argc, &argv, o)) {
        return *exit_code;
    }
    o.tables = !o.quiet && !no_tables && (tables || halo::app::stdout_is_terminal());
    const bool chosen_by_default = o.partitioner == "auto";
    if (chosen_by_default) {
        o.partitioner = halo_partition::default_partitioner();
    }
    const bool distributed = o.partitioner == "ptscotch" || o.partitioner == "dkaminpar";
    const auto usage_error = check_options(o, owner_option->count() > 0);
    if (!usage_error.empty() && !distributed) {
        fmt::print(stderr, "halo-partition: error: {}\n", usage_error);
        return halo::app::kExitUsage;
    }
    if (o.kaminpar_preset == "auto") {
        o.kaminpar_preset = halo_partition::default_kaminpar_preset();
    }
    if (chosen_by_default && o.parts > 1 && owner_option->count() == 0 && !o.quiet) {
        fmt::print(stderr,
                   "halo-partition: partitioner: {}{} (the default for --parts > 1 in this build; "
                   "--partitioner chooses another)\n",
                   o.partitioner,
                   o.partitioner == "kaminpar" ? ", preset " + o.kaminpar_preset : "");
    }
    const auto command = halo::app::command_line(argc, argv);
    if (!distributed) {
        return halo::app::run_guarded("halo-partition", [&] { return run(o, command); });
    }
    // Under mpirun: the option error too is said once, by rank 0, after MPI started.
    return halo_partition::main_distributed(&argc, &argv, o, command, usage_error);
}
