// halo-inspect: summary of a dataset (root attributes, per-part table) with an optional full
// check of every invariant; or of a halo-infer result directory, optionally compared with another
// result or with reference logits from another framework (a .npy file, e.g. PyG's own logits
// written by tools/export_pyg.py; docs/PYG.md), and optionally exported as .npy.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app_common.hpp"
#include "halo/core/io.hpp"
#include "halo/core/layer_type.hpp"
#include "halo/core/result.hpp"
#include "halo/kernels_host/gather_model.hpp"
#include "halo/kernels_host/spmm_registry.hpp"
#include "halo/store/store.hpp"

namespace {

struct Options {
    std::string path;
    bool layer_types = false;
    bool kernels = false;
    int part = -1;
    bool check = false;
    std::string compare;
    std::string compare_logits;
    std::string labels;
    std::string test_index;
    bool require_identical = false;
    std::string json;
    std::string export_logits;
    std::string export_path;
    double tolerance = -1.0;
    double rtol = -1.0;
    std::vector<std::int64_t> gather_widths;  // --gather-model
    double cache_mib = 30.0;
};

// A result holds rows by global id; a dense logits file holds row i for node i. The two line up
// only when the result covers every node 0..n-1 exactly once (read_results sorts and rejects
// duplicates, so checking the ends and the count is enough).
void require_all_nodes(const halo::ResultSet& result, const std::string& dir, const char* why)
{
    const auto n = static_cast<std::int64_t>(result.global_ids.size());
    if (n == 0 || result.global_ids.front() != 0 || result.global_ids.back() != n - 1) {
        HALO_THROW(halo::InputError, dir, ": holds ", n, " rows with global ids ",
                   n == 0 ? -1 : result.global_ids.front(), "..",
                   n == 0 ? -1 : result.global_ids.back(), "; ", why,
                   " needs a result of every node 0..num_nodes-1");
    }
}

// Correct predictions among the labelled nodes of `eval` (each id once, as halo-infer
// --eval-nodes counts them), or of every node when `eval` is null.
struct Accuracy {
    std::int64_t correct = 0;
    std::int64_t evaluated = 0;
    double value() const { return evaluated > 0 ? double(correct) / double(evaluated) : 0.0; }
};

Accuracy accuracy(const std::vector<std::int32_t>& prediction,
                  const std::vector<std::int32_t>& labels, const std::vector<halo::global_id>* eval)
{
    Accuracy a;
    auto count = [&](std::int64_t i) {
        if (labels[i] != halo::no_label) {
            ++a.evaluated;
            a.correct += prediction[i] == labels[i] ? 1 : 0;
        }
    };
    if (eval == nullptr) {
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(labels.size()); ++i) {
            count(i);
        }
    } else {
        for (const auto i : *eval) {
            count(i);
        }
    }
    return a;
}

// --compare-logits: halo-infer's outputs against reference logits of the same graph and model.
// Exit status 3 when a requested check fails (--tolerance, --rtol, --require-identical).
int compare_logits(const Options& o, const halo::ResultSet& result)
{
    require_all_nodes(result, o.path, "--compare-logits");
    const auto ref = halo::read_npy(o.compare_logits);
    const auto n = static_cast<std::int64_t>(result.global_ids.size());
    if (ref.rows != n || ref.cols != result.output_dim) {
        HALO_THROW(halo::InputError, o.compare_logits, ": shape [", ref.rows, ", ", ref.cols,
                   "], but ", o.path, " holds ", n, " rows of width ", result.output_dim,
                   ": not logits of the same graph and model");
    }
    double max_abs = 0.0;
    double max_ref = 0.0;
    std::int64_t worst = 0;
    for (std::size_t k = 0; k < ref.values.size(); ++k) {
        const double d = std::abs(double(result.output[k]) - double(ref.values[k]));
        if (d > max_abs) {
            max_abs = d;
            worst = static_cast<std::int64_t>(k);
        }
        max_ref = std::max(max_ref, std::abs(double(ref.values[k])));
    }
    // The reference's predictions by the same rule as halo-infer's (lowest index among equal
    // maxima; torch.argmax picks the first maximum too).
    const auto ref_prediction = halo::argmax_rows(ref.values, ref.cols);
    std::int64_t same = 0;
    std::int64_t first_differing = -1;
    for (std::int64_t i = 0; i < n; ++i) {
        if (result.prediction[i] == ref_prediction[i]) {
            ++same;
        } else if (first_differing < 0) {
            first_differing = i;
        }
    }
    fmt::print(
        "compared with {} ({} x {}): max |difference| {:.3e} at node {} column {} (largest "
        "|value| {:.3e}), identical predictions {:.4f}% ({} of {})\n",
        o.compare_logits, ref.rows, ref.cols, max_abs, worst / ref.cols, worst % ref.cols, max_ref,
        100.0 * double(same) / double(n), same, n);
    if (first_differing >= 0) {
        fmt::print("  first differing prediction: node {}: {} here, {} in the reference\n",
                   first_differing, result.prediction[first_differing],
                   ref_prediction[first_differing]);
    }

    Accuracy ours;
    Accuracy theirs;
    const bool with_labels = !o.labels.empty();
    if (with_labels) {
        const auto labels = halo::read_labels(o.labels);
        if (static_cast<std::int64_t>(labels.size()) != n) {
            HALO_THROW(halo::InputError, o.labels, ": ", labels.size(), " labels, but ", o.path,
                       " holds ", n, " nodes");
        }
        std::vector<halo::global_id> eval;
        if (!o.test_index.empty()) {
            eval = halo::read_index_list(o.test_index, n);
            std::sort(eval.begin(), eval.end());
            eval.erase(std::unique(eval.begin(), eval.end()), eval.end());
        }
        const auto* listed = o.test_index.empty() ? nullptr : &eval;
        ours = accuracy(result.prediction, labels, listed);
        theirs = accuracy(ref_prediction, labels, listed);
        fmt::print("  accuracy on {}: {:.4f} here ({} of {}), {:.4f} in the reference ({} of {})\n",
                   o.test_index.empty() ? "every labelled node" : o.test_index, ours.value(),
                   ours.correct, ours.evaluated, theirs.value(), theirs.correct, theirs.evaluated);
    }

    std::vector<std::string> failures;
    if (o.tolerance >= 0.0 && max_abs > o.tolerance) {
        failures.push_back(fmt::format("max |difference| {:.3e} exceeds --tolerance {:.3e}",
                                       max_abs, o.tolerance));
    }
    if (o.rtol >= 0.0 && max_abs > o.rtol * max_ref) {
        failures.push_back(
            fmt::format("max |difference| {:.3e} exceeds --rtol {:.3e} x largest |value| {:.3e}",
                        max_abs, o.rtol, max_ref));
    }
    if (o.require_identical && same != n) {
        failures.push_back(fmt::format("{} of {} predictions differ (first at node {})", n - same,
                                       n, first_differing));
    }
    if (o.require_identical && with_labels && ours.correct != theirs.correct) {
        failures.push_back(fmt::format("accuracy {} of {} differs from the reference's {} of {}",
                                       ours.correct, ours.evaluated, theirs.correct,
                                       theirs.evaluated));
    }
    for (const auto& f : failures) {
        fmt::print(stderr, "halo-inspect: {}\n", f);
    }
    if (!o.json.empty()) {
        nlohmann::json j = {{"result", o.path},
                            {"reference", o.compare_logits},
                            {"rows", n},
                            {"cols", ref.cols},
                            {"num_parts", result.num_parts},
                            {"max_abs_diff", max_abs},
                            {"max_abs_reference", max_ref},
                            {"identical_predictions", same},
                            {"identical_prediction_share", double(same) / double(n)},
                            {"passed", failures.empty()},
                            {"failures", failures}};
        if (with_labels) {
            j["labels"] = o.labels;
            j["eval_nodes"] = o.test_index.empty() ? "all labelled" : o.test_index;
            j["accuracy"] = {{"evaluated", ours.evaluated},
                             {"halo_correct", ours.correct},
                             {"reference_correct", theirs.correct},
                             {"halo", ours.value()},
                             {"reference", theirs.value()}};
        }
        halo::write_file_atomic(o.json, j.dump(2) + "\n");
    }
    return failures.empty() ? 0 : 3;
}

// Bytes of a part as the dataset stores them (what its read moved from the file).
double stored_bytes(const halo::Shard& s)
{
    const auto b = [](const auto& v) { return static_cast<double>(v.size() * sizeof(v[0])); };
    return b(s.global_ids) + b(s.halo_global_ids) + b(s.csr.indptr) + b(s.csr.indices) +
           b(s.csr.values) + b(s.plan.recv_ranks) + b(s.plan.recv_offsets) + b(s.plan.send_ranks) +
           b(s.plan.send_offsets) + b(s.plan.send_rows) + b(s.labels) +
           (s.features_int8.empty()
                ? b(s.features)
                : b(s.features_int8) + b(s.feature_scale) + b(s.feature_zero_point));
}

// --gather-model: per part and width, the X rows an SpMM over the part's adjacency reads in its
// stored row order through a cache of --cache-mib (halo/kernels_host/gather_model.hpp): LRU's
// misses (the estimate that matched Nsight Compute's DRAM bytes at half of an H100's or H200's L2,
// i.e. the default 30 MiB; docs/NOTEBOOK.md "The gather-bound limit") and Belady's MIN (the fewest
// any cache of that size has), against reading each X row once. Compares row orders on the host.
std::int64_t gather_cache_bytes(const Options& o)
{
    return static_cast<std::int64_t>(o.cache_mib * double(1 << 20));
}

// One part's misses for every --gather-model width.
std::vector<halo::GatherTraffic> gather_traffic(const Options& o, const halo::Shard& shard)
{
    std::vector<std::int64_t> capacities;
    for (const auto d : o.gather_widths) {
        capacities.push_back(halo::cache_capacity_rows(gather_cache_bytes(o), d * 4));
    }
    return halo::gather_traffic(shard.csr.view(), capacities);
}

// traffic[p - first]: part p's, from gather_traffic.
void gather_report(const Options& o, int first,
                   const std::vector<std::vector<halo::GatherTraffic>>& traffic)
{
    const auto cache = gather_cache_bytes(o);
    fmt::print(
        "\ngather model: X rows read by each part's adjacency in its row order, cache {} "
        "(LRU: the estimate of DRAM traffic; MIN: its floor)\n",
        halo::app::format_bytes(double(cache)));
    fmt::print("{:>5} {:>6} {:>12} {:>14} {:>12} {:>14} {:>14} {:>12} {:>12}\n", "part", "d",
               "cache rows", "X rows read", "distinct", "LRU misses", "MIN misses", "LRU GB",
               "LRU / once");
    for (std::size_t k = 0; k < traffic.size(); ++k) {
        const auto p = first + static_cast<int>(k);
        for (std::size_t i = 0; i < traffic[k].size(); ++i) {
            const auto& t = traffic[k][i];
            const auto row = o.gather_widths[i] * 4;
            fmt::print("{:>5} {:>6} {:>12} {:>14} {:>12} {:>14} {:>14} {:>12.3f} {:>11.2f}x\n", p,
                       o.gather_widths[i], t.capacity_rows, t.accesses, t.distinct, t.lru_misses,
                       t.min_misses, double(t.lru_misses * row) / 1e9,
                       double(t.lru_misses) / double(std::max<std::int64_t>(1, t.distinct)));
        }
    }
}

int inspect_dataset(const Options& o)
{
    const auto info = halo::read_dataset_info(o.path);
    fmt::print("{}: {} v{}\n", o.path, info.format, info.version);
    fmt::print("  nodes {}  nonzeros {}  parts {}  partitioner {}  row order {}\n", info.num_nodes,
               info.num_nonzeros, info.num_parts, info.partitioner, info.row_order);
    fmt::print("  normalization {}  self-loops {}  values {}  features {}  labels {}\n",
               info.normalization, info.self_loops, info.has_values ? "yes" : "no (pattern)",
               info.feature_dim > 0 ? fmt::format("{} ({})", info.feature_dim, info.feature_type)
                                    : std::string("0"),
               info.has_labels ? "yes" : "no");
    fmt::print("  created by: {}\n\n", info.created_by);
    if (o.part >= info.num_parts) {
        HALO_THROW(halo::InputError, o.path, ": part ", o.part, " requested, the dataset has ",
                   info.num_parts);
    }
    fmt::print("{:>5} {:>12} {:>14} {:>12} {:>12} {:>10} {:>12} {:>12}\n", "part", "owned rows",
               "nonzeros", "interior", "halo rows", "neighbours", "send rows", "max row");
    const int first = o.part >= 0 ? o.part : 0;
    const int last = o.part >= 0 ? o.part + 1 : info.num_parts;
    double read_seconds = 0.0;
    double read_bytes = 0.0;
    std::vector<std::vector<halo::GatherTraffic>> traffic;  // --gather-model, per part read
    for (int p = first; p < last; ++p) {
        const halo::app::Stopwatch read_watch;
        const auto shard = halo::read_shard(o.path, p);
        read_seconds += read_watch.seconds();
        read_bytes += stored_bytes(shard);
        if (!o.gather_widths.empty()) {
            traffic.push_back(gather_traffic(o, shard));
        }
        fmt::print("{:>5} {:>12} {:>14} {:>12} {:>12} {:>10} {:>12} {:>12}\n", p, shard.num_owned,
                   shard.csr.nnz(), shard.num_interior, shard.num_halo,
                   shard.plan.recv_ranks.size(), shard.plan.num_send(),
                   halo::max_row_nnz(shard.csr.view()));
    }
    fmt::print("read {} part(s): {:.3f} GB in {:.3f} s ({:.2f} GB/s, checks included)\n",
               last - first, read_bytes / 1e9, read_seconds, read_bytes / 1e9 / read_seconds);
    // Kernel metadata stored with the parts (halo-partition --kernel-metadata, halo-infer
    // --save-tuning), as kernel/operator groups; --check validates them.
    for (int p = first; p < last; ++p) {
        const auto names = halo::list_kernel_metadata(o.path, p);
        if (!names.empty()) {
            std::string list;
            for (const auto& n : names) {
                list += (list.empty() ? "" : ", ") + n;
            }
            fmt::print("part {} kernel metadata: {}\n", p, list);
        }
    }
    if (!o.gather_widths.empty()) {
        gather_report(o, first, traffic);
    }
    if (o.check) {
        halo::app::Stopwatch watch;
        halo::check_dataset(o.path);
        fmt::print("\ncheck: every invariant holds ({:.2f} s)\n", watch.seconds());
    }
    return 0;
}

int inspect_results(const Options& o)
{
    auto result = halo::read_results(o.path);
    fmt::print("{}: {} rows from {} pieces, output width {}\n", o.path, result.global_ids.size(),
               result.num_parts, result.output_dim);
    if (!o.export_logits.empty()) {
        require_all_nodes(result, o.path, "--export-logits");
        halo::DenseMatrix m;
        m.rows = static_cast<std::int64_t>(result.global_ids.size());
        m.cols = result.output_dim;
        m.values = std::move(result.output);  // lent for the write, not copied
        halo::write_npy(o.export_logits, m);
        result.output = std::move(m.values);
        fmt::print("wrote {} ({} x {} float32, row i = node i)\n", o.export_logits, m.rows, m.cols);
    }
    if (!o.export_path.empty()) {
        halo::app::Stopwatch watch;
        const auto rows = static_cast<std::int64_t>(result.global_ids.size());
        if (std::filesystem::path(o.export_path).extension() == ".npy") {
            require_all_nodes(result, o.path, "--export to .npy");
            halo::DenseMatrix m;
            m.rows = rows;
            m.cols = result.output_dim;
            m.values = std::move(result.output);
            halo::write_npy(o.export_path, m);
            result.output = std::move(m.values);
        } else {
            halo::write_result_export(o.export_path, result);
        }
        const double bytes = static_cast<double>(result.output.size()) * 4.0;
        fmt::print("exported {} rows x {} in global-id order to {} ({:.3f} GB of outputs, {:.2f} "
                   "s)\n",
                   rows, result.output_dim, o.export_path, bytes / 1e9, watch.seconds());
    }
    if (!o.compare_logits.empty()) {
        return compare_logits(o, result);
    }
    if (o.compare.empty()) {
        return 0;
    }
    const auto other = halo::read_results(o.compare);
    if (other.global_ids != result.global_ids || other.output_dim != result.output_dim) {
        HALO_THROW(halo::InputError, o.compare, ": holds ", other.global_ids.size(),
                   " rows of width ", other.output_dim, ", ", o.path, " holds ",
                   result.global_ids.size(), " of width ", result.output_dim,
                   ": not results of the same graph and model");
    }
    double max_abs = 0.0;
    double max_ref = 0.0;
    std::int64_t bit_equal = 0;
    for (std::size_t k = 0; k < result.output.size(); ++k) {
        max_abs = std::max(max_abs, std::abs(double(result.output[k]) - other.output[k]));
        max_ref = std::max(max_ref, std::abs(double(other.output[k])));
        bit_equal += result.output[k] == other.output[k] ? 1 : 0;
    }
    std::int64_t same_prediction = 0;
    for (std::size_t i = 0; i < result.prediction.size(); ++i) {
        same_prediction += result.prediction[i] == other.prediction[i] ? 1 : 0;
    }
    const auto rows = static_cast<double>(result.prediction.size());
    fmt::print(
        "compared with {} ({} pieces): max |difference| {:.3e} (largest |value| {:.3e}), "
        "{:.4f}% of values bit-identical, {:.4f}% identical predictions\n",
        o.compare, other.num_parts, max_abs, max_ref,
        100.0 * bit_equal / std::max<double>(1.0, result.output.size()),
        100.0 * same_prediction / std::max(1.0, rows));
    if (o.tolerance >= 0.0 && max_abs > o.tolerance) {
        fmt::print(stderr, "halo-inspect: max |difference| {:.3e} exceeds --tolerance {:.3e}\n",
                   max_abs, o.tolerance);
        return 3;
    }
    if (o.rtol >= 0.0 && max_abs > o.rtol * max_ref) {
        fmt::print(stderr,
                   "halo-inspect: max |difference| {:.3e} exceeds --rtol {:.3e} x largest |value| "
                   "{:.3e}\n",
                   max_abs, o.rtol, max_ref);
        return 3;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    Options o;
    CLI::App app{
        "halo-inspect: summarize and check a HaloGNN dataset, or a halo-infer result "
        "directory"};
    auto* path = app.add_option("path", o.path, "dataset (.h5) or result directory");
    path->excludes(
        app.add_flag("--layer-types", o.layer_types,
                     "print the table of layer types (halo/core/layer_type.hpp) as JSON: "
                     "names, scalar attributes and arrays with their shapes, as the "
                     "model file holds them (python/halognn/layer_types.json)"));
    path->excludes(
        app.add_flag("--kernels", o.kernels,
                     "print the SpMM kernel registry (halo/kernels_host/spmm_registry.hpp) "
                     "as Markdown: every kernel, its uses and properties, and each "
                     "tool's list (docs/KERNELS.md holds a copy)")
            ->excludes("--layer-types"));
    app.parse_complete_callback([&] {
        if (!o.layer_types && !o.kernels && o.path.empty()) {
            throw CLI::RequiredError("path");
        }
    });
    app.add_option("--part", o.part, "show this part only")->check(CLI::NonNegativeNumber);
    app.add_flag("--check", o.check, "validate every invariant of the dataset");
    auto* compare =
        app.add_option("--compare", o.compare, "result directory to compare with (results only)");
    auto* logits =
        app.add_option("--compare-logits", o.compare_logits,
                       "reference logits (.npy, float32 [num_nodes, width], row i = node i, e.g. "
                       "PyG's from tools/export_pyg.py) to compare a result directory with");
    logits->excludes(compare);
    auto* labels = app.add_option("--labels", o.labels,
                                  "with --compare-logits: labels file (one per line, -1: none); "
                                  "prints the accuracy of both")
                       ->needs(logits);
    app.add_option("--test-index", o.test_index,
                   "with --labels: node ids (one per line) to compute the accuracy on (default: "
                   "every labelled node)")
        ->needs(labels);
    app.add_flag("--require-identical", o.require_identical,
                 "with --compare-logits: exit with status 3 unless every predicted class equals "
                 "the reference's and (with --labels) the accuracies are equal")
        ->needs(logits);
    app.add_option("--json", o.json, "with --compare-logits: also write the comparison as JSON")
        ->needs(logits);
    app.add_option("--export-logits", o.export_logits,
                   "write the result's outputs as .npy (float32 [num_nodes, width], row i = node "
                   "i; results only)");
    app.add_option("--export", o.export_path,
                   "write the whole result in global-id order: FILE.npy (float32 [num_nodes, "
                   "width], row i = node i) or FILE.h5 (global_ids, output, prediction; "
                   "docs/FORMAT.md); results only")
        ->excludes("--export-logits");
    app.add_option("--tolerance", o.tolerance,
                   "with --compare or --compare-logits: exit with status 3 if max |difference| "
                   "exceeds it (0: bit-identical outputs required)");
    app.add_option("--rtol", o.rtol,
                   "with --compare or --compare-logits: exit with status 3 if max |difference| "
                   "exceeds RTOL times the largest |value| of the other result");
    app.add_option("--gather-model", o.gather_widths,
                   "datasets: for these feature widths (comma-separated), the X rows an SpMM over "
                   "each part's adjacency reads from DRAM in its stored row order, as an LRU "
                   "cache and Belady's MIN of --cache-mib miss them (compare --row-order choices "
                   "without a GPU)")
        ->delimiter(',')
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16));
    app.add_option("--cache-mib", o.cache_mib,
                   "with --gather-model: the cache in MiB (default 30: half of an H100's or "
                   "H200's L2, what matched the measured DRAM bytes)")
        ->check(CLI::Range(1.0 / 1024.0, 1048576.0))
        ->capture_default_str();
    if (const auto exit_code = halo::app::parse_command_line(app, argc, argv, "halo-inspect")) {
        return *exit_code;
    }
    if (o.layer_types) {
        fmt::print("{}", halo::layer_types_json());
        return 0;
    }
    if (o.kernels) {
        fmt::print("{}", halo::spmm_kernels_markdown());
        return 0;
    }
    return halo::app::run_guarded("halo-inspect", [&] {
        if (std::filesystem::is_directory(o.path)) {
            if (!o.gather_widths.empty()) {
                HALO_THROW(halo::InputError, o.path,
                           ": a result directory (--gather-model works on datasets)");
            }
            return inspect_results(o);
        }
        if (!o.compare.empty() || !o.compare_logits.empty() || !o.export_logits.empty() ||
            !o.export_path.empty()) {
            HALO_THROW(halo::InputError, o.path,
                       ": not a result directory (--compare, --compare-logits, --export and "
                       "--export-logits work on halo-infer result directories)");
        }
        return inspect_dataset(o);
    });
}
