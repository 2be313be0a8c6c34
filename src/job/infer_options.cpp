// InferOptions' rules, each stated once (include/halo/job/infer_options.hpp).
#include "halo/job/infer_options.hpp"

#include <filesystem>

#include "halo/comm/exchange_spec.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/core/io.hpp"
#include "halo/core/layer_type.hpp"
#include "halo/core/memory_report.hpp"
#include "halo/store/model_file.hpp"
#include "halo/store/store.hpp"

namespace halo {

namespace {

// The NCCL exchange's options name what they need in one way.
std::string not_nccl(const InferOptions& o)
{
    return o.cuda() ? "--exchange " + o.exchange : "--backend " + o.backend;
}

bool nccl(const InferOptions& o)
{
    return o.cuda() && o.transport() == "nccl";
}

// Layers whose exchange is not rows of floats (maxk's CBSR records): int8 rows would corrupt it.
void check_model_exchange(const InferOptions& o, const Model& model)
{
    if (!parse_exchange_spec(o.exchange).int8_rows) {
        return;
    }
    for (const auto& layer : model.layers) {
        const auto why = layer_type_info(layer.type).int8_exchange_refusal;
        if (!why.empty()) {
            HALO_THROW(UsageError, "--exchange ", o.exchange, " with ", to_string(layer.type),
                       " layers: ", why, "; use --exchange ", o.transport());
        }
    }
}

}  // namespace

std::string InferOptions::model_name() const
{
    return model.empty() ? "random:" + layer + ":" + random_model : model;
}

std::string InferOptions::transport() const
{
    return requested_transport(parse_exchange_spec(exchange), cuda());
}

std::string InferOptions::spmm_name() const
{
    return !spmm.empty() ? spmm : cuda() ? "auto" : "reference";
}

std::string InferOptions::overlap_name() const
{
    if (no_overlap) {
        return "none";
    }
    if (overlap == "auto") {
        return cuda() ? "split" : "interior";
    }
    return overlap;
}

bool InferOptions::replay(int ranks) const
{
    return cuda_graph || (cuda() && ranks == 1 && !save_layers && !step_timing && !no_cuda_graph);
}

BackendSpec InferOptions::backend_spec() const
{
    BackendSpec spec;
    spec.kind = backend;
    spec.spmm = spmm;
    spec.device = device;
    spec.pattern_operators = pattern_operators;
    spec.l2_hints = l2_hints;
    return spec;
}

void validate(const InferOptions& o)
{
    if (o.dataset.empty()) {
        HALO_THROW(UsageError, "a dataset is required");
    }
    if (o.out.empty()) {
        HALO_THROW(UsageError, "--out is required");
    }
    if (o.model.empty() == o.random_model.empty()) {
        HALO_THROW(UsageError, o.model.empty() ? "--model or --random-model is required"
                                               : "--model excludes --random-model");
    }
    if (o.model.empty()) {
        static_cast<void>(parse_dims(o.random_model));
        static_cast<void>(parse_layer_type(o.layer));
    }
    const auto exchange = parse_exchange_spec(o.exchange);
    if (!o.cuda() && (o.transport() != "mpi" || o.device >= 0)) {
        HALO_THROW(UsageError, o.device >= 0 ? "--device" : "--exchange " + o.exchange,
                   " needs --backend cuda (the cpu backend runs on the host and exchanges over "
                   "MPI)");
    }
    if (o.nccl_register != "auto" && o.nccl_register != "off") {
        static_cast<void>(parse_registration(o.nccl_register));
        if (!nccl(o)) {
            HALO_THROW(UsageError,
                       "--nccl-register on needs the NCCL exchange (--backend cuda, --exchange "
                       "nccl or nccl-int8 or the default), not ",
                       not_nccl(o));
        }
    }
    if (o.exchange_pieces > 1 && !nccl(o)) {  // 1 or unset: anywhere
        HALO_THROW(UsageError, "--exchange-pieces ", o.exchange_pieces,
                   " needs the NCCL exchange (--backend cuda, --exchange nccl or nccl-int8 or "
                   "the default), not ",
                   not_nccl(o));
    }
    if (o.save_tuning && o.spmm != "autotune") {
        HALO_THROW(UsageError,
                   "--save-tuning needs --spmm autotune (only the autotuner makes choices worth "
                   "storing)");
    }
    if (o.save_tuning && o.no_save_tuning) {
        HALO_THROW(UsageError, "--save-tuning excludes --no-save-tuning");
    }
    if (o.pattern_operators && o.host_values) {
        HALO_THROW(UsageError,
                   "--pattern-operators with --host-operator-values: the host's values leave no "
                   "pattern to keep; drop one of the two");
    }
    try {
        check_backend_spec(o.backend_spec());
    } catch (const UsageError&) {
        throw;
    } catch (const InputError& e) {
        throw UsageError(e.message(), nullptr, 0);
    }
    if (o.split_share != 1.0 && o.overlap_name() != "split") {
        HALO_THROW(UsageError, "--split-share ", o.split_share,
                   " needs the split overlap (--overlap split, or auto with --backend cuda), "
                   "not ",
                   o.no_overlap ? "--no-overlap" : "--overlap " + o.overlap + " on " + o.backend);
    }
    if (o.int8_features && exchange.int8_rows) {
        HALO_THROW(UsageError, "--int8-features with --exchange ", o.exchange,
                   ": the first layer already exchanges int8 rows, and re-quantizing them would "
                   "corrupt them; drop one of the two");
    }
    FeatureType activations = FeatureType::fp32;
    try {
        activations = parse_feature_type(o.activations);
    } catch (const InputError&) {
        HALO_THROW(UsageError, "--activations ", o.activations,
                   ": not a type activations are stored in (fp32, bf16 or fp16)");
    }
    if (activations != FeatureType::fp32) {
        // 16-bit activations go where 16-bit rows are defined (docs/KERNELS.md, "16-bit
        // activations"); these paths move other rows.
        const char* other = o.int8_features ? "--int8-features"
                            : exchange.int8_rows ? "an int8 exchange (--exchange *-int8)"
                            : o.out_of_core ? "--out-of-core"
                                            : nullptr;
        if (other != nullptr) {
            HALO_THROW(UsageError, "--activations ", o.activations, " with ", other,
                       ": not supported yet (16-bit rows run in memory, from fp32, fp16 or "
                       "bf16 features, over fp32-row exchanges); drop one of the two");
        }
    }
    if (o.cuda_graph && (!o.cuda() || o.save_layers || o.step_timing || o.no_cuda_graph)) {
        HALO_THROW(UsageError,
                   "--cuda-graph needs --backend cuda, one rank (a dataset of one part), no "
                   "--save-layers, no --step-timing and no --no-cuda-graph");
    }
    if (o.stream_pattern && o.stream_values) {
        HALO_THROW(UsageError, "--stream-operator-pattern excludes --stream-operator-values");
    }
    if (!o.device_memory_limit.empty()) {
        static_cast<void>(parse_byte_size(o.device_memory_limit));
    }
    if ((!o.checkpoint.empty() || !o.resume.empty()) && o.out_of_core) {
        HALO_THROW(UsageError, !o.checkpoint.empty() ? "--checkpoint" : "--resume",
                   " with --out-of-core: the row-block runs keep no layer's rows to write or "
                   "start from");
    }
    if (!o.resume.empty() && (o.save_layers || o.cuda_graph)) {
        HALO_THROW(UsageError, "--resume with ", o.save_layers ? "--save-layers" : "--cuda-graph",
                   ": a resumed run does not run the layers before the checkpoint",
                   o.save_layers ? "" : " (nor records the whole forward pass)");
    }
    if (o.repeat < 1) {
        HALO_THROW(UsageError, "--repeat ", o.repeat, " must be at least 1");
    }
}

void validate_job(const InferOptions& o, const DatasetInfo& info, const Model& model, int ranks)
{
    if (info.num_parts != ranks) {
        HALO_THROW(InputError, o.dataset, " has ", info.num_parts, " parts but the job has ", ranks,
                   " rank", ranks == 1 ? "" : "s", ": run with mpirun -np ", info.num_parts,
                   ", or partition again with --parts ", ranks);
    }
    if (o.cuda_graph && ranks > 1) {
        HALO_THROW(UsageError, "--cuda-graph needs one rank (a dataset of one part), the job has ",
                   ranks);
    }
    check_model_exchange(o, model);
    if (info.feature_dim == 0 && !o.random_features) {
        HALO_THROW(InputError, o.dataset,
                   " stores no features (width 0) but the model's first "
                   "layer takes ",
                   model.input_dim(),
                   ": partition with --features FILE, or pass "
                   "--random-features to run on seeded random features of width ",
                   model.input_dim());
    }
    if (info.feature_dim > 0 && info.feature_dim != model.input_dim()) {
        HALO_THROW(InputError, o.dataset, " has features of width ", info.feature_dim,
                   " but the model's first layer takes ", model.input_dim());
    }
    if (o.int8_features && info.feature_type != "int8") {
        HALO_THROW(InputError, "--int8-features: ", o.dataset, " holds ",
                   info.feature_dim > 0 ? info.feature_type : std::string("no"),
                   " features (partition with --features ... --quantize int8)");
    }
    if (!o.eval_nodes.empty()) {
        if (!std::filesystem::is_regular_file(o.eval_nodes)) {
            HALO_THROW(InputError, o.eval_nodes, ": no such file (--eval-nodes)");
        }
        if (!info.has_labels) {
            HALO_THROW(InputError, "--eval-nodes given, but ", o.dataset, " has no labels");
        }
    }
}

Model load_model(const InferOptions& o)
{
    if (!o.model.empty()) {
        if (!std::filesystem::is_regular_file(o.model)) {
            HALO_THROW(InputError, o.model, ": no such file (--model)");
        }
        return read_model(o.model);
    }
    RandomModelOptions ropt;
    ropt.k = o.k;
    ropt.heads = o.heads;
    return random_model(parse_layer_type(o.layer), parse_dims(o.random_model), o.seed, ropt);
}

EngineOptions engine_options(const InferOptions& o, int ranks, const std::string& normalization)
{
    EngineOptions e;
    e.overlap = !o.no_overlap;
    const auto overlap = o.overlap_name();
    e.overlap_mode = overlap == "split" ? OverlapMode::split : OverlapMode::interior;
    e.split_share = o.split_share;
    // One synchronization per layer unless --step-timing splits each layer into its steps.
    e.step_timing = o.step_timing;
    e.exchange_barrier = o.exchange_barrier;
    e.replay = o.replay(ranks);
    e.keep_layers = o.save_layers;
    e.dataset_normalization = normalization;
    e.attention = o.attention == "exact" ? AttentionKernel::exact : AttentionKernel::fused;
    if (!o.device_memory_limit.empty()) {
        e.device_memory_limit = parse_byte_size(o.device_memory_limit);
    }
    if (o.out_of_core) {
        e.execution = Execution::row_blocks;
    }
    e.operator_stream = o.stream_pattern  ? OperatorStream::pattern
                        : o.stream_values ? OperatorStream::values
                                          : OperatorStream::automatic;
    e.device_operator_values = !o.host_values;
    e.activations = parse_feature_type(o.activations);
    return e;
}

}  // namespace halo
