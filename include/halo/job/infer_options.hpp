// The options of one inference job (halo-infer's command line, halo-bench --e2e's engine) and
// every rule about them, stated once: which options go together, what "auto" resolves to, and
// the policy defaults (the replay of the forward pass, the overlap mode, the SpMM kernel). Part of
// halo_job (docs/ARCHITECTURE.md); needs neither MPI nor the data.
#pragma once

#include <cstdint>
#include <string>

#include "halo/core/error.hpp"
#include "halo/core/model.hpp"
#include "halo/engine/backend_spec.hpp"
#include "halo/engine/engine.hpp"

namespace halo {

struct DatasetInfo;

/// A command line that cannot describe a job (two options that exclude each other, an option that
/// needs another): the drivers exit 2 for it, as for an unknown option.
class UsageError : public InputError {
public:
    using InputError::InputError;
};

struct InferOptions {
    // input
    std::string dataset;
    // model: a file, or random with these widths (input first) from the seed
    std::string model;
    std::string random_model;
    std::string layer = "gcn";  // layer type of the random model
    std::int64_t k = 16;        // random maxk layers: entries kept per row
    std::int64_t heads = 1;     // random transformer and gat layers
    std::uint64_t seed = 1;     // random weights and random input features
    std::string attention = "fused";
    /// A dataset without features runs on seeded random features of the model's input width;
    /// refused otherwise (the dataset was probably partitioned without --features by mistake).
    bool random_features = false;
    // execution
    std::string backend = "cpu";
    int device = -1;   // -1: local rank modulo the visible devices
    std::string spmm;  // empty: the backend's default (auto on cuda, the reference on cpu)
    bool save_tuning = false;
    bool no_save_tuning = false;
    bool ignore_kernel_metadata = false;
    bool int8_features = false;
    bool pattern_operators = false;
    bool l2_hints = false;
    bool host_values = false;
    std::string input_transform = "auto";  // auto | dense | sparse
    /// fp32 | bf16 | fp16: the type activations are stored in (EngineOptions::activations).
    std::string activations = "fp32";
    bool cuda_graph = false;
    bool no_cuda_graph = false;
    int repeat = 1;
    // exchange
    std::string exchange;  // empty: nccl on cuda, mpi on cpu; int8 / *-int8: int8 rows
    std::string nccl_register = "auto";
    int exchange_pieces = 0;  // 0: ExchangeSpec's default
    bool no_overlap = false;
    std::string overlap = "auto";  // auto | interior | split
    double split_share = 1.0;
    bool exchange_barrier = false;
    bool sync_layers = false;
    bool step_timing = false;
    // memory
    std::string device_memory_limit;  // empty: the backend's default
    bool out_of_core = false;
    bool stream_pattern = false;
    bool stream_values = false;
    // output
    std::string out;
    bool overwrite = false;  // --out may hold another job's result: removed first
    bool save_layers = false;
    bool no_sync = false;
    std::string eval_nodes;
    /// Each finished layer's rows written here, per rank, as the first run goes (restart).
    std::string checkpoint;
    /// A checkpoint of this job (same dataset, model, seed, rank count): the run starts after
    /// the last layer every rank finished.
    std::string resume;
    // diagnostics
    bool quiet = false;
    bool report = false;  // the tables on standard output (the manifest holds them always)

    bool cuda() const { return backend == "cuda"; }
    /// The model as the manifest names it: the file, or random:<layer>:<widths>.
    std::string model_name() const;
    /// The exchange transport the options ask for ("mpi", "nccl"), alike on every rank.
    std::string transport() const;
    /// The SpMM kernel's name as the manifest records it.
    std::string spmm_name() const;
    /// The overlap the options resolve to: split on cuda and interior on cpu for "auto"; "none"
    /// with no_overlap.
    std::string overlap_name() const;
    /// Whether the forward pass is recorded and replayed (a CUDA graph): asked for, or by
    /// default on one CUDA rank without save_layers and step_timing, never with no_cuda_graph.
    bool replay(int ranks) const;
    BackendSpec backend_spec() const;
};

/// Every rule that needs neither the data nor MPI; throws UsageError naming the options.
void validate(const InferOptions& options);

/// The rules that need the job's size and the dataset's root attributes and the model (read
/// before any rank reads its part): the rank count, the feature width and type against the
/// model, labels for eval_nodes, the model against the exchange. Throws InputError (UsageError
/// where the options alone conflict given the rank count).
void validate_job(const InferOptions& options, const DatasetInfo& info, const Model& model,
                  int ranks);

/// The model the options name (read from its file, or random from the seed), validated.
Model load_model(const InferOptions& options);

/// The engine's options for a job of `ranks` ranks on a dataset whose stored values are
/// `normalization`: every policy default (replay, overlap, one synchronization per layer) from
/// here, so that halo-infer and halo-bench --e2e run alike. Kernel metadata and the per-layer
/// hook are the job's to add.
EngineOptions engine_options(const InferOptions& options, int ranks,
                             const std::string& normalization);

}  // namespace halo
