// halo-inspect: summary of a dataset (root attributes, per-part table) with an optional full
// check of every invariant; or of a halo-infer result directory, optionally compared with another.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "app_common.hpp"
#include "halo/result.hpp"
#include "halo/store.hpp"

namespace {

struct Options {
    std::string path;
    int part = -1;
    bool check = false;
    std::string compare;
    double tolerance = -1.0;
    double rtol = -1.0;
};

int inspect_dataset(const Options& o)
{
    const auto info = halo::read_dataset_info(o.path);
    fmt::print("{}: {} v{}\n", o.path, info.format, info.version);
    fmt::print("  nodes {}  nonzeros {}  parts {}  partitioner {}\n", info.num_nodes,
               info.num_nonzeros, info.num_parts, info.partitioner);
    fmt::print("  normalization {}  self-loops {}  values {}  features {}  labels {}\n",
               info.normalization, info.self_loops, info.has_values ? "yes" : "no (pattern)",
               info.feature_dim, info.has_labels ? "yes" : "no");
    fmt::print("  created by: {}\n\n", info.created_by);
    if (o.part >= info.num_parts) {
        HALO_THROW(halo::InputError, o.path, ": part ", o.part, " requested, the dataset has ",
                   info.num_parts);
    }
    fmt::print("{:>5} {:>12} {:>14} {:>12} {:>12} {:>10} {:>12} {:>12}\n", "part", "owned rows",
               "nonzeros", "interior", "halo rows", "neighbours", "send rows", "max row");
    const int first = o.part >= 0 ? o.part : 0;
    const int last = o.part >= 0 ? o.part + 1 : info.num_parts;
    for (int p = first; p < last; ++p) {
        const auto shard = halo::read_shard(o.path, p);
        fmt::print("{:>5} {:>12} {:>14} {:>12} {:>12} {:>10} {:>12} {:>12}\n", p, shard.num_owned,
                   shard.csr.nnz(), shard.num_interior, shard.num_halo,
                   shard.plan.recv_ranks.size(), shard.plan.num_send(),
                   halo::max_row_nnz(shard.csr.view()));
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
    const auto result = halo::read_results(o.path);
    fmt::print("{}: {} rows from {} pieces, output width {}\n", o.path, result.global_ids.size(),
               result.num_parts, result.output_dim);
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
    app.add_option("path", o.path, "dataset (.h5) or result directory")->required();
    app.add_option("--part", o.part, "show this part only")->check(CLI::NonNegativeNumber);
    app.add_flag("--check", o.check, "validate every invariant of the dataset");
    app.add_option("--compare", o.compare, "result directory to compare with (results only)");
    app.add_option("--tolerance", o.tolerance,
                   "with --compare: exit with status 3 if max |difference| exceeds it (0: "
                   "bit-identical outputs required)");
    app.add_option("--rtol", o.rtol,
                   "with --compare: exit with status 3 if max |difference| exceeds RTOL times the "
                   "largest |value| of the other result");
    CLI11_PARSE(app, argc, argv);
    return halo::app::run_guarded("halo-inspect", [&] {
        return std::filesystem::is_directory(o.path) ? inspect_results(o) : inspect_dataset(o);
    });
}
