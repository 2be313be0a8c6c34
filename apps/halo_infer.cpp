// halo-infer: layer-wise GNN inference, one rank per shard (mpirun -np P halo-infer ...).
//
// Every rank reads its own part, checks the halo plans collectively, runs the model with the halo
// exchange overlapped with interior aggregation, and writes its own rows. Rank 0 writes the
// manifest last, after every rank reported success, so an interrupted run never looks complete.
// A failure on any rank aborts the whole job (MPI_Abort): no rank is left waiting.
#include <fcntl.h>
#include <fmt/core.h>
#include <mpi.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "app_common.hpp"
#include "halo/backend_spec.hpp"
#include "halo/detail/parallel_copy.hpp"
#include "halo/detail/resident_memory.hpp"
#include "halo/engine.hpp"
#include "halo/exchange_spec.hpp"
#include "halo/feature_type.hpp"
#include "halo/feature_upload.hpp"
#include "halo/io.hpp"
#include "halo/model.hpp"
#include "halo/model_file.hpp"
#include "halo/mpi_error.hpp"
#include "halo/mpi_exchanger.hpp"
#include "halo/mpi_world.hpp"
#include "halo/result.hpp"
#include "halo/spmm_registry.hpp"
#include "halo/store.hpp"
#include "phase_table.hpp"
#ifdef HALO_HAVE_CUDA
#include "halo/cuda/context.hpp"
#endif

namespace {

// --input-transform auto: the first layer's x W as an SpMM where at most this share of the
// dataset's features is nonzero. Measured on an H100 (docs/PERFORMANCE.md "Sparse input
// features: where the SpMM wins"): the SpMM of 50,000 x 1024 rows by a 1024 x 256 weight grows
// with the nonzeros and meets the dense GEMM at about 14%; 10% keeps a margin.
constexpr double kSparseInputDensity = 0.10;

struct Options {
    std::string dataset;
    std::string model;
    std::string random_model;
    std::string layer = "gcn";
    std::uint64_t seed = 1;
    std::string out;
    std::string backend = "cpu";
    std::string exchange;  // empty: nccl for --backend cuda, mpi for cpu
    std::string nccl_register = "auto";
    std::string spmm;      // empty: cusparse (cuda) or the reference (cpu); aes:W[:scaling]
    std::string attention = "fused";
    std::int64_t k = 16;
    std::int64_t heads = 1;
    int device = -1;  // -1: local rank modulo the visible devices
    bool save_layers = false;
    bool no_overlap = false;
    std::string overlap = "auto";
    double split_share = 1.0;
    bool sync_layers = false;
    std::string eval_nodes;
    int repeat = 1;
    bool quiet = false;
    bool save_tuning = false;
    bool ignore_kernel_metadata = false;
    bool int8_features = false;
    bool layer_timing_only = false;
    bool cuda_graph = false;
    bool step_timing = false;
    bool exchange_barrier = false;
    int exchange_pieces = 0;  // 0: ExchangeSpec's default
    bool no_cuda_graph = false;
    bool no_save_tuning = false;
    std::string device_memory_limit;  // empty = the backend's default
    bool out_of_core = false;         // row blocks even when the shard fits
    bool stream_pattern = false;      // out of core: a scaled operator's pattern alone, always
    bool stream_values = false;       // out of core: a scaled operator's values, always
    bool host_values = false;         // in memory: the host builds every operator's values
    bool pattern_operators = false;   // MergePath / row-split: no values even for gcn
    bool l2_hints = false;            // MergePath: L2 hints where X is past 32x the L2
    bool no_sync = false;             // result pieces renamed without an fsync
    std::string input_transform = "auto";  // auto | dense | sparse (the first layer's x W)
    // Set by main() before run(): the dataset file as this rank found it before reading it.
    std::pair<dev_t, ino_t> dataset_identity{};
};

// HALO_FAULT_INJECT="rank=R,layer=L": rank R throws before layer L (tests of the abort path).
// "rank=R,layer=L,sleep=S": rank R sleeps S seconds there instead, its peers waiting in the
// layer's halo exchange, so that a test can kill it (kill -9, SIGTERM) in the middle of the job
// (tests/apps/test_faults.sh).
void maybe_inject_fault(int rank, std::size_t layer)
{
    const char* spec = std::getenv("HALO_FAULT_INJECT");
    if (spec == nullptr) {
        return;
    }
    int fault_rank = -1;
    int fault_layer = -1;
    int sleep_seconds = -1;
    const int fields =
        std::sscanf(spec, "rank=%d,layer=%d,sleep=%d", &fault_rank, &fault_layer, &sleep_seconds);
    if (fields < 2 || (fields == 3 && sleep_seconds < 0)) {
        HALO_THROW(halo::InputError, "HALO_FAULT_INJECT='", spec,
                   "' (expected rank=R,layer=L or rank=R,layer=L,sleep=S)");
    }
    if (fault_rank == rank && fault_layer == static_cast<int>(layer)) {
        if (fields == 3) {
            std::fprintf(stderr,
                         "rank %d (pid %d): sleeping %d s before layer %zu (HALO_FAULT_INJECT)\n",
                         rank, static_cast<int>(::getpid()), sleep_seconds, layer);
            std::this_thread::sleep_for(std::chrono::seconds(sleep_seconds));
            return;
        }
        HALO_THROW(halo::Error, "injected fault before layer ", layer, " (HALO_FAULT_INJECT)");
    }
}

struct Stat {
    double max = 0.0;
    double mean = 0.0;
    int max_rank = 0;  // the lowest rank with the maximum
};

Stat reduce_stat(MPI_Comm comm, double value, int size)
{
    struct {
        double value;
        int rank;
    } mine{value, 0}, top{0.0, 0};
    HALO_MPI_TRY(MPI_Comm_rank(comm, &mine.rank));
    HALO_MPI_TRY(MPI_Allreduce(&mine, &top, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
    Stat s;
    s.max = top.value;
    s.max_rank = top.rank;
    HALO_MPI_TRY(MPI_Allreduce(&value, &s.mean, 1, MPI_DOUBLE, MPI_SUM, comm));
    s.mean /= size;
    return s;
}

// Stores every rank's new autotune choices in its part of the dataset. HDF5 locks a file that
// one process writes, so the ranks take turns (a barrier between turns); every rank has closed the
// dataset since it read its part. With `required` (--save-tuning) a failed write is reported by
// its rank and aborts the job like any other error; by default (the choices are stored unasked)
// it is a warning of that rank: a read-only dataset still runs, it only times again next time.
void save_tuning(halo::MpiWorld& world, const std::string& dataset,
                 const std::vector<halo::KernelMetadata>& metadata, bool lead, bool required)
{
    std::int64_t written = 0;
    for (int turn = 0; turn < world.size(); ++turn) {
        if (turn == world.rank()) {
            for (const auto& md : metadata) {
                try {
                    halo::store_kernel_metadata(dataset, world.rank(), md);
                    ++written;
                } catch (const halo::Error& e) {
                    if (required) {
                        throw;
                    }
                    fmt::print(stderr,
                               "halo-infer: warning: rank {}: autotune choices not stored ({}); "
                               "the next run times again\n",
                               world.rank(), e.message());
                    break;
                }
            }
        }
        HALO_MPI_TRY(MPI_Barrier(world.comm()));
    }
    std::int64_t total = 0;
    HALO_MPI_TRY(MPI_Allreduce(&written, &total, 1, MPI_INT64_T, MPI_SUM, world.comm()));
    if (lead) {
        fmt::print("stored {} autotune group(s) in {} (kernels/autotune of each part)\n", total,
                   dataset);
    }
}

// The backend the options name (main() checks it before MPI starts; run() adds the local rank).
halo::BackendSpec backend_spec(const Options& o)
{
    halo::BackendSpec spec;
    spec.kind = o.backend;
    spec.spmm = o.spmm;
    spec.device = o.device;
    spec.pattern_operators = o.pattern_operators;
    spec.l2_hints = o.l2_hints;
    return spec;
}

// Every check that needs neither the data nor MPI: run before MPI_Init, so that a conflict of
// options is one message and a clean exit 1, never an MPI_Abort of a started job.
void check_options(const Options& o)
{
    const bool cuda = o.backend == "cuda";
    const auto exchange_spec = halo::parse_exchange_spec(o.exchange);
    const bool int8_rows = exchange_spec.int8_rows;
    const std::string exchange = halo::requested_transport(exchange_spec, cuda);
    if (!cuda && (exchange != "mpi" || o.device >= 0)) {
        HALO_THROW(halo::InputError, o.device >= 0 ? "--device" : "--exchange " + o.exchange,
                   " needs --backend cuda (the cpu backend runs on the host and exchanges over "
                   "MPI)");
    }
    if (o.nccl_register == "on" && (!cuda || exchange != "nccl")) {
        HALO_THROW(halo::InputError,
                   "--nccl-register on needs the NCCL exchange (--backend cuda, "
                   "--exchange nccl or nccl-int8 or the default), not ",
                   cuda ? "--exchange " + o.exchange : "--backend " + o.backend);
    }
    if (o.exchange_pieces > 1 && (!cuda || exchange != "nccl")) {  // 1 or unset: anywhere
        HALO_THROW(halo::InputError, "--exchange-pieces ", o.exchange_pieces,
                   " needs the NCCL exchange (--backend cuda, --exchange nccl or nccl-int8 or "
                   "the default), not ",
                   cuda ? "--exchange " + o.exchange : "--backend " + o.backend);
    }
    if (o.save_tuning && o.spmm != "autotune") {
        HALO_THROW(halo::InputError,
                   "--save-tuning needs --spmm autotune (only the autotuner "
                   "makes choices worth storing)");
    }
    if (o.pattern_operators && o.host_values) {
        HALO_THROW(halo::InputError,
                   "--pattern-operators with --host-operator-values: the host's values leave no "
                   "pattern to keep; drop one of the two");
    }
    halo::check_backend_spec(backend_spec(o));
    const bool split = o.overlap == "split" || (o.overlap == "auto" && cuda);
    if (o.split_share != 1.0 && (o.no_overlap || !split)) {
        HALO_THROW(halo::InputError, "--split-share ", o.split_share,
                   " needs the split overlap (--overlap split, or auto with --backend cuda), "
                   "not ",
                   o.no_overlap ? "--no-overlap" : "--overlap " + o.overlap + " on " + o.backend);
    }
    if (o.int8_features && int8_rows) {
        HALO_THROW(halo::InputError, "--int8-features with --exchange ", o.exchange,
                   ": the first layer already exchanges int8 rows, and re-quantizing them would "
                   "corrupt them; drop one of the two");
    }
    if (o.cuda_graph && (!cuda || o.save_layers || o.step_timing)) {
        HALO_THROW(halo::InputError,
                   "--cuda-graph needs --backend cuda, one rank (a dataset of one part), no "
                   "--save-layers and no --step-timing");
    }
    maybe_inject_fault(-1, 0);  // a malformed HALO_FAULT_INJECT is an error before the job
    if (o.model.empty()) {
        // A random model's shape is known now; a model file's is checked in run() once read.
        static_cast<void>(halo::parse_dims(o.random_model));
        if (int8_rows && halo::parse_layer_type(o.layer) == halo::LayerType::maxk) {
            HALO_THROW(halo::InputError, "--exchange ", o.exchange,
                       " with --layer maxk: maxk layers exchange CBSR "
                       "records (values and column indices), which int8 quantization would "
                       "corrupt; use --exchange ",
                       exchange,
                       " (the records are already ~6k "
                       "instead of 4D bytes per row)");
        }
    }
}

// Checks every rank makes alike from the files' existence and the dataset's root attributes,
// before any rank reads its part or writes anything: main() reports the first failing rank's
// message once and every rank exits 1 without MPI_Abort.
void check_inputs(const Options& o, int size)
{
    const auto info = halo::read_dataset_info(o.dataset);
    if (info.num_parts != size) {
        HALO_THROW(halo::InputError, o.dataset, " has ", info.num_parts, " parts but the job has ",
                   size, " rank", size == 1 ? "" : "s", ": run with mpirun -np ", info.num_parts,
                   ", or partition again with --parts ", size);
    }
    if (!o.model.empty() && !std::filesystem::is_regular_file(o.model)) {
        HALO_THROW(halo::InputError, o.model, ": no such file (--model)");
    }
    if (!o.eval_nodes.empty()) {
        if (!std::filesystem::is_regular_file(o.eval_nodes)) {
            HALO_THROW(halo::InputError, o.eval_nodes, ": no such file (--eval-nodes)");
        }
        if (!info.has_labels) {
            HALO_THROW(halo::InputError, "--eval-nodes given, but ", o.dataset, " has no labels");
        }
    }
}

// The checks that need only the number of ranks (rank 0 reports them once after MPI_Init).
void check_job_size(const Options& o, int size)
{
    if (o.cuda_graph && size > 1) {
        HALO_THROW(halo::InputError,
                   "--cuda-graph needs one rank (a dataset of one part), the "
                   "job has ",
                   size);
    }
}

// The file system object at `path` (device and inode): another halo-partition -o onto the path
// renames a new file over it, which changes the inode; --save-tuning edits it in place, which does
// not.
std::pair<dev_t, ino_t> file_identity(const std::string& path)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return {};
    }
    return {st.st_dev, st.st_ino};
}

// Thrown before the manifest: the dataset at the path is no longer the file this rank read at the
// start, so the ranks may have read parts of two different datasets.
void check_dataset_unchanged(const Options& o)
{
    if (file_identity(o.dataset) != o.dataset_identity) {
        HALO_THROW(halo::InputError, o.dataset,
                   ": the dataset was replaced (or removed) while the job ran; its ranks may have "
                   "read parts of two different datasets, so no manifest is written. Run again.");
    }
}

// An exclusive lock on <out>/.halo-infer.lock, held by rank 0 for the whole job (flock: released
// by the kernel however the process ends, kill -9 included). A second job writing the same --out
// fails at once instead of mixing its pieces with this job's under one manifest.
class OutputLock {
public:
    explicit OutputLock(const std::filesystem::path& dir)
    {
        const auto path = dir / ".halo-infer.lock";
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) {
            HALO_THROW(halo::IoError, path.string(),
                       ": cannot create the lock file: ", std::strerror(errno));
        }
        if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            const int error = errno;
            ::close(fd_);
            fd_ = -1;
            if (error == EWOULDBLOCK) {
                HALO_THROW(halo::InputError, "--out ", dir.string(),
                           ": another halo-infer job is writing this directory (it holds ",
                           path.string(), "); wait for it or choose another --out");
            }
            HALO_THROW(halo::IoError, path.string(), ": cannot lock: ", std::strerror(error));
        }
    }
    ~OutputLock()
    {
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    OutputLock(const OutputLock&) = delete;
    OutputLock& operator=(const OutputLock&) = delete;

private:
    int fd_ = -1;
};

// SIGTERM (scancel, mpirun forwarding a kill) and SIGINT: one line saying so, then the default
// action, so the job still ends at once. The line is built before the handler is installed, since
// only write() may be called in a handler.
char termination_note[160];
std::size_t termination_note_length = 0;

extern "C" void report_termination(int signal)
{
    if (termination_note_length > 0) {
        static_cast<void>(::write(STDERR_FILENO, termination_note, termination_note_length));
    }
    std::signal(signal, SIG_DFL);
    std::raise(signal);
}

void install_termination_report(int rank)
{
    const int n = std::snprintf(termination_note, sizeof termination_note,
                                "halo-infer: rank %d: terminated by a signal (SIGTERM or SIGINT); "
                                "the run is incomplete and writes no manifest\n",
                                rank);
    termination_note_length = n > 0 ? static_cast<std::size_t>(n) : 0;
    std::signal(SIGTERM, report_termination);
    std::signal(SIGINT, report_termination);
}

// Bytes of a part as the dataset stores them (what its read moved from the file).
// The bytes of the shard as stored: a 16-bit feature dataset (halo-partition --quantize fp16 |
// bf16) is read as 2 bytes a value, though the shard holds them widened to float32.
double stored_bytes(const halo::Shard& s, const halo::DatasetInfo& info)
{
    const auto b = [](const auto& v) { return static_cast<double>(v.size() * sizeof(v[0])); };
    double total = b(s.global_ids) + b(s.halo_global_ids) + b(s.csr.indptr) + b(s.csr.indices) +
                   b(s.csr.values) + b(s.plan.recv_ranks) + b(s.plan.recv_offsets) +
                   b(s.plan.send_ranks) + b(s.plan.send_offsets) + b(s.plan.send_rows) +
                   b(s.labels);
    const auto stored = halo::feature_type_from_stored_name(info.feature_type);
    const bool bits16 = stored.has_value() && *stored != halo::FeatureType::fp32;
    total += !s.features_int8.empty()
                 ? b(s.features_int8) + b(s.feature_scale) + b(s.feature_zero_point)
             : bits16 ? b(s.features) / 2
                      : b(s.features);
    return total;
}

// What the steps of one job share: the world, the options, the phase table.
struct Job {
    Job(halo::MpiWorld& w, const Options& options)
        : world(w),
          o(options),
          rank(w.rank()),
          size(w.size()),
          lead(w.rank() == 0 && !options.quiet),
          cuda(options.backend == "cuda")
    {
    }

    halo::MpiWorld& world;
    const Options& o;
    int rank = 0;
    int size = 1;
    bool lead = false;  // rank 0 prints, unless --quiet
    bool cuda = false;
    halo::app::PhaseLog phases;
    halo::app::Stopwatch step;  // restarted by each phase
};

// Model: from a file, or random from the seed (the same on every rank), checked against the
// dataset and the exchange.
halo::Model load_model(Job& job, const halo::DatasetInfo& info)
{
    const auto& o = job.o;
    job.step.restart();
    halo::Model model;
    if (!o.model.empty()) {
        model = halo::read_model(o.model);
    } else {
        halo::RandomModelOptions ropt;
        ropt.k = o.k;
        ropt.heads = o.heads;
        model = halo::random_model(halo::parse_layer_type(o.layer),
                                   halo::parse_dims(o.random_model), o.seed, ropt);
    }
    if (o.int8_features && info.feature_type != "int8") {
        HALO_THROW(halo::InputError, "--int8-features: ", o.dataset, " holds ",
                   info.feature_dim > 0 ? info.feature_type : std::string("no"),
                   " features (partition with --features ... --quantize int8)");
    }
    const auto exchange = halo::parse_exchange_spec(o.exchange);
    for (const auto& layer : model.layers) {
        if (exchange.int8_rows && layer.type == halo::LayerType::maxk) {
            HALO_THROW(halo::InputError, "--exchange ", o.exchange,
                       ": maxk layers exchange CBSR records "
                       "(values and column indices), which int8 quantization would corrupt; "
                       "use --exchange ",
                       halo::requested_transport(exchange, job.cuda), " (the records are already ~",
                       "6k instead of 4D bytes per row)");
        }
    }
    if (info.feature_dim > 0 && info.feature_dim != model.input_dim()) {
        HALO_THROW(halo::InputError, o.dataset, " has features of width ", info.feature_dim,
                   " but the model's first layer takes ", model.input_dim());
    }
    job.phases.add("model", job.step.seconds(), -1.0,
                   o.model.empty() ? "random from the seed" : o.model);
    return model;
}

// The engine's options from the command line and the dataset (its kernel metadata included).
halo::EngineOptions engine_options(Job& job, const halo::DatasetInfo& info)
{
    const auto& o = job.o;
    halo::EngineOptions eopt;
    eopt.overlap = !o.no_overlap;
    eopt.overlap_mode = o.overlap == "split"      ? halo::OverlapMode::split
                        : o.overlap == "interior" ? halo::OverlapMode::interior
                                                  : halo::OverlapMode::automatic;
    eopt.split_share = o.split_share;
    // Defaults: one synchronization per layer (--step-timing splits each layer into compute
    // and exchange), and on one CUDA rank the forward pass replayed as a CUDA graph from the
    // second run on (--no-cuda-graph: never).
    eopt.step_timing = o.step_timing;
    eopt.exchange_barrier = o.exchange_barrier;
    if (o.cuda_graph && (!job.cuda || job.size > 1 || o.save_layers || o.step_timing)) {
        HALO_THROW(halo::InputError,
                   "--cuda-graph needs --backend cuda, one rank (a dataset of one part), no "
                   "--save-layers and no --step-timing");
    }
    eopt.replay = o.cuda_graph || (job.cuda && job.size == 1 && !o.save_layers && !o.step_timing &&
                                   !o.no_cuda_graph);
    eopt.keep_layers = o.save_layers;
    eopt.dataset_normalization = info.normalization;
    eopt.attention =
        o.attention == "exact" ? halo::AttentionKernel::exact : halo::AttentionKernel::fused;
    job.step.restart();
    if (job.cuda && !o.ignore_kernel_metadata) {
        // Kernel metadata stored for this part (docs/FORMAT.md): Accel-GCN's partition, the
        // autotuner's choices. Plans take what applies to them and say so in the kernel report.
        for (const auto& name : halo::list_kernel_metadata(o.dataset, job.rank)) {
            const auto slash = name.find('/');
            if (auto md = halo::read_kernel_metadata(o.dataset, job.rank, name.substr(0, slash),
                                                     name.substr(slash + 1))) {
                eopt.kernel_metadata.push_back(std::move(*md));
            }
        }
    }
    const MPI_Comm comm = job.world.comm();
    eopt.before_layer = [rank = job.rank, comm, sync_layers = o.sync_layers](std::size_t layer) {
        maybe_inject_fault(rank, layer);
        if (sync_layers) {
            HALO_MPI_TRY(MPI_Barrier(comm));
        }
    };
    job.phases.add("kernel metadata read", job.step.seconds(), -1.0,
                   fmt::format("{} group(s)", eopt.kernel_metadata.size()));
    // Device memory limit and out-of-core execution (docs/ENGINE.md "Out-of-core execution").
    if (!o.device_memory_limit.empty()) {
        eopt.device_memory_limit = halo::parse_byte_size(o.device_memory_limit);
    }
    if (o.out_of_core) {
        eopt.execution = halo::Execution::row_blocks;
    }
    eopt.operator_stream = o.stream_pattern  ? halo::OperatorStream::pattern
                           : o.stream_values ? halo::OperatorStream::values
                                             : halo::OperatorStream::automatic;
    eopt.device_operator_values = !o.host_values;
    return eopt;
}

// The medians of --repeat runs; the output is the engine's host buffer, valid until its next run.
struct Runs {
    std::span<const float> output;        // empty when the last run's download was deferred
    bool deferred = false;                // the last run left its output on the device
    std::vector<double> run_seconds;      // each run's, the last without a deferred download
    double median_seconds = 0.0;          // the whole call, upload and download included
    double forward_median_seconds = 0.0;  // the layers only, the slowest rank's
};

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// Features from the dataset go to the device while the rest of the part is read where that
// pays and is safe: a device backend, float32 features into float32 layers, and a matrix of at
// most an eighth of the device memory the engine may use, so that holding it beside the engine's
// buffers until the first run does not change its in-memory / out-of-core decision; never with
// an explicit memory limit or --out-of-core (the user rations the device), nor with
// HALO_FEATURE_UPLOAD=0. Null otherwise.
std::unique_ptr<halo::FeatureUpload> feature_upload(const Job& job, const halo::DatasetInfo& info,
                                                    halo::Backend& backend)
{
    const auto& o = job.o;
    // HALO_FEATURE_UPLOAD=0: upload after the read, as before (a measurement switch).
    if (const char* env = std::getenv("HALO_FEATURE_UPLOAD");
        env != nullptr && env == std::string("0")) {
        return nullptr;
    }
    if (backend.uses_host_memory() || info.feature_dim <= 0 || o.int8_features ||
        info.feature_type == "int8" || !o.device_memory_limit.empty() || o.out_of_core) {
        return nullptr;
    }
    return std::make_unique<halo::FeatureUpload>(backend, backend.default_memory_limit() / 8);
}

std::string read_note(const halo::DatasetInfo& info, const halo::FeatureUpload* upload)
{
    if (info.feature_dim <= 0) {
        return "part";
    }
    if (upload == nullptr) {
        return "part, features included";
    }
    if (!upload->declined().empty()) {
        return "part, features included (not uploaded during the read: " + upload->declined() +
               ")";
    }
    return fmt::format(
        "part, features included and uploaded during the read ({:.3f} GB in {:.3f} s of "
        "copies on the reader's thread)",
        static_cast<double>(upload->bytes()) / 1e9, upload->seconds());
}

// run: the whole call, features uploaded and outputs downloaded; forward: the layers only (sum
// of the per-layer wall times, what a framework's forward() measures with the input already in
// place), the slowest rank's.
// `uploaded`: the features already on the device (FeatureUpload), used by the first run and then
// dropped; later runs upload them from the shard, so that each run's time includes its upload.
Runs run_repeats(Job& job, halo::Engine& engine, const halo::Shard& shard,
                 const halo::DatasetInfo& info, const halo::Model& model,
                 std::optional<halo::Matrix>& uploaded)
{
    const auto& o = job.o;
    auto& phases = job.phases;
    Runs runs;
    std::vector<double> run_seconds;
    std::vector<double> forward_seconds;
    const auto runs_note = fmt::format("{} run{}", o.repeat, o.repeat == 1 ? "" : "s");
    const auto out_bytes = static_cast<double>(shard.num_owned * model.output_dim()) * 4.0;
    double input_bytes = 0.0;
    std::string input_note;
    if (o.int8_features) {
        input_bytes = static_cast<double>(shard.features_int8.size());
        input_note = "int8 features from the dataset, uploaded";
    } else if (info.feature_dim > 0) {
        input_bytes = static_cast<double>(shard.features.size()) * 4.0;
        input_note = uploaded ? "features from the dataset, uploaded during the read (the first "
                                "run copies them on the device)"
                              : "features from the dataset, uploaded";
    } else {
        input_bytes = static_cast<double>(shard.num_owned) * 8.0;
        input_note = job.cuda ? "random from the seed, generated on the device (ids uploaded)"
                              : "random from the seed, generated in place";
    }
    phases.add("input features", 0.0, 0.0, input_note + ", " + runs_note);
    phases.add("tuning", 0.0, -1.0, "autotuner trials in the first run");
    phases.add("layers", 0.0, -1.0, runs_note);
    phases.add("download", 0.0, 0.0, runs_note);
    for (int r = 0; r < o.repeat; ++r) {
        HALO_MPI_TRY(MPI_Barrier(job.world.comm()));
        // The last run's output is downloaded while it is written (write_piece).
        runs.deferred = r + 1 == o.repeat;
        if (runs.deferred) {
            engine.defer_download();
        }
        halo::app::Stopwatch watch;
        if (o.int8_features) {
            const halo::QuantizedView q{
                shard.features_int8.data(), shard.num_owned,
                info.feature_dim,           info.feature_dim,
                shard.feature_scale.data(), shard.feature_zero_point.data()};
            runs.output = engine.forward(q);
        } else if (uploaded) {
            runs.output = engine.forward(*uploaded);
            uploaded.reset();
        } else if (info.feature_dim > 0) {
            runs.output = engine.forward(shard.features);
        } else {
            runs.output = engine.forward_random(o.seed);
        }
        HALO_MPI_TRY(MPI_Barrier(job.world.comm()));
        run_seconds.push_back(watch.seconds());
        phases.accumulate("input features", engine.input_seconds(), input_bytes);
        phases.accumulate("layers", engine.forward_seconds());
        phases.accumulate("download", engine.download_seconds(), out_bytes);
        double forward = engine.forward_seconds();
        double slowest = 0.0;
        HALO_MPI_TRY(MPI_Allreduce(&forward, &slowest, 1, MPI_DOUBLE, MPI_MAX, job.world.comm()));
        forward_seconds.push_back(slowest);
    }
    // Out of core the output is in host memory whatever was asked.
    runs.deferred = runs.deferred && runs.output.empty();
    runs.run_seconds = run_seconds;
    runs.median_seconds = median(run_seconds);
    runs.forward_median_seconds = median(forward_seconds);
    // Tuning ran inside the first run's layers: its own row, out of the layers' time.
    const double tuning_seconds = engine.tuning_seconds();
    phases.accumulate("tuning", tuning_seconds);
    phases.accumulate("layers", -tuning_seconds);
    return runs;
}

// The output rows of a deferred run (Engine::defer_download) as write_result_piece asks for
// them (halo::OutputRows): each batch downloaded into one of three page-locked buffers (a batch
// stays readable until the call after next), on the writer's threads while earlier batches are
// written; the downloads timed.
class DeferredRows {
public:
    DeferredRows(const halo::Engine& engine, halo::Backend& backend, std::int64_t width)
        : engine_(engine), backend_(backend), width_(width)
    {
    }

    const float* operator()(std::int64_t first, std::int64_t count)
    {
        backend_.bind_thread();
        auto& buffer = buffers_[next_];
        next_ = (next_ + 1) % buffers_.size();
        if (buffer.rows() < count) {
            buffer = backend_.allocate_host(count, width_);
        }
        const halo::app::Stopwatch watch;
        engine_.download_rows(first, count, buffer.data());
        seconds_ += watch.seconds();
        return buffer.data();
    }

    double seconds() const { return seconds_; }

private:
    const halo::Engine& engine_;
    halo::Backend& backend_;
    std::int64_t width_;
    std::array<halo::Matrix, 3> buffers_;
    std::size_t next_ = 0;
    double seconds_ = 0.0;
};

// Each rank writes its own rows (with the argmax of each, and every layer's with
// --save-layers); returns the predictions. A deferred last run (Runs::deferred) is downloaded
// batch by batch while it is written: its download then counts in the "download"
// row, the rest of the write's time in "result write", and the last run's time gets it added;
// the predictions are the argmax taken on the device (Engine::deferred_predictions).
std::vector<std::int32_t> write_piece(Job& job, const halo::Engine& engine, halo::Backend& backend,
                                      const halo::Shard& shard, const halo::Model& model,
                                      Runs& runs)
{
    job.step.restart();
    halo::ResultPiece piece;
    piece.part = job.rank;
    piece.num_parts = job.size;
    piece.global_ids = halo::detail::resident_vector<halo::global_id>(shard.global_ids.size());
    halo::detail::parallel_copy(shard.global_ids.data(),
                                static_cast<std::int64_t>(shard.global_ids.size()),
                                piece.global_ids.data());
    piece.output_dim = model.output_dim();
    if (!runs.deferred) {
        piece.prediction = halo::argmax_rows(runs.output, model.output_dim());
    } else {
        piece.prediction = halo::detail::resident_vector<std::int32_t>(shard.global_ids.size());
        engine.deferred_predictions(piece.prediction.data());
    }
    if (job.o.save_layers) {
        piece.layers = engine.layer_outputs();
        for (const auto& layer : model.layers) {
            piece.layer_dims.push_back(layer.out_dim);
        }
    }
    const double prepare_seconds = job.step.seconds();
    job.step.restart();
    const auto write_options = halo::ResultWriteOptions{.sync = !job.o.no_sync};
    double download_seconds = 0.0;
    if (runs.deferred) {
        DeferredRows rows(engine, backend, model.output_dim());
        halo::write_result_piece(job.o.out, piece,
                                 halo::OutputRows([&rows](std::int64_t first, std::int64_t count) {
                                     return rows(first, count);
                                 }),
                                 write_options);
        download_seconds = rows.seconds();
        job.phases.accumulate("download", download_seconds, -1.0,
                              fmt::format("{} run{}, the last one batch by batch during the "
                                          "result write",
                                          job.o.repeat, job.o.repeat == 1 ? "" : "s"));
        runs.run_seconds.back() += download_seconds;
        runs.median_seconds = median(runs.run_seconds);
    } else {
        halo::write_result_piece(job.o.out, piece, runs.output, write_options);
    }
    const double write_seconds = job.step.seconds() - download_seconds;
    job.phases.add("predictions", prepare_seconds, -1.0,
                   runs.deferred ? "argmax of every output row, on the device"
                                 : "argmax of every output row");
    double written = static_cast<double>(shard.num_owned * model.output_dim()) * 4.0 +
                     static_cast<double>(piece.global_ids.size()) * 8.0 +
                     static_cast<double>(piece.prediction.size()) * 4.0;
    for (const auto& layer : piece.layers) {
        written += static_cast<double>(layer.size()) * 4.0;
    }
    std::string note =
        job.o.no_sync ? "own rows, not synced (--no-sync)" : "own rows, synced to disk";
    if (runs.deferred) {
        note += "; the last run downloaded batch by batch meanwhile (its time in download)";
    }
    job.phases.add("result write", write_seconds, written, note);
    return std::move(piece.prediction);
}

// Accuracy over the evaluation nodes each rank owns: {correct, evaluated} summed over ranks.
std::array<std::int64_t, 2> accuracy(Job& job, const halo::Shard& shard,
                                     const halo::DatasetInfo& info,
                                     const std::vector<std::int32_t>& prediction)
{
    std::array<std::int64_t, 2> counts{0, 0};
    if (!job.o.eval_nodes.empty()) {
        if (shard.labels.empty()) {
            HALO_THROW(halo::InputError, "--eval-nodes given, but ", job.o.dataset,
                       " has no labels");
        }
        const auto ids = halo::read_index_list(job.o.eval_nodes, info.num_nodes);
        const std::unordered_set<halo::global_id> wanted(ids.begin(), ids.end());
        for (std::int64_t i = 0; i < shard.num_owned; ++i) {
            if (wanted.count(shard.global_ids[i]) != 0 && shard.labels[i] >= 0) {
                ++counts[1];
                counts[0] += prediction[i] == shard.labels[i] ? 1 : 0;
            }
        }
    }
    std::array<std::int64_t, 2> totals{0, 0};
    HALO_MPI_TRY(
        MPI_Allreduce(counts.data(), totals.data(), 2, MPI_INT64_T, MPI_SUM, job.world.comm()));
    return totals;
}

// Per-layer times reduced over ranks: the table (rank 0) and its manifest rows; adds the bytes
// moved over all ranks and layers, as exchanged and as fp32 rows would have been.
nlohmann::json report_layers(Job& job, const halo::Engine& engine, const halo::Model& model,
                             bool step_timing, double& exchanged_total, double& fp32_total)
{
    const auto comm = job.world.comm();
    const auto size = job.size;
    nlohmann::json layers_json = nlohmann::json::array();
    if (job.lead) {
        fmt::print("{:>5} {:>6} {:>10} | {:>21} | {:>21} | {:>21} | {:>11} | {:>9}\n", "layer",
                   "type", "width", "total ms (max/mean)", "compute ms (max/mean)",
                   "exchange ms (max/mean)", "waiting max", "skew max");
    }
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        const auto& t = engine.timings()[l];
        const auto tot = reduce_stat(comm, t.total * 1e3, size);
        const auto comp = reduce_stat(comm, t.compute * 1e3, size);
        const auto exch = reduce_stat(comm, t.exchange * 1e3, size);
        const auto wait = reduce_stat(comm, t.waiting * 1e3, size);
        const auto skew = reduce_stat(comm, t.skew * 1e3, size);
        const auto bytes = reduce_stat(comm, static_cast<double>(t.exchanged_bytes), size);
        const auto fp32_bytes = reduce_stat(comm, static_cast<double>(t.fp32_exchange_bytes), size);
        exchanged_total += bytes.mean * size;
        fp32_total += fp32_bytes.mean * size;
        const auto& layer = model.layers[l];
        if (job.lead) {
            // Only what was measured: per-step splits need --step-timing, and a replayed graph
            // has no per-layer times at all.
            const auto ms = [](const Stat& v, bool measured) {
                return measured ? fmt::format("{:>10.3f} {:>10.3f}", v.max, v.mean)
                                : fmt::format("{:>10} {:>10}", "n/a", "n/a");
            };
            const bool layer_measured = !engine.replayed();
            const bool step_measured = layer_measured && step_timing;
            const auto max_ms = [&](const Stat& v) {
                return step_measured ? fmt::format("{:.3f}", v.max) : std::string("n/a");
            };
            fmt::print("{:>5} {:>6} {:>4}->{:<5} | {} | {} | {} | {:>11} | {:>9}\n", l,
                       halo::to_string(layer.type), layer.in_dim, layer.out_dim,
                       ms(tot, layer_measured), ms(comp, step_measured), ms(exch, step_measured),
                       max_ms(wait), max_ms(skew));
        }
        layers_json.push_back(
            {{"layer", l},
             {"timing", engine.replayed() ? "replayed (not measured per layer)"
                        : step_timing     ? "per step"
                                          : "per layer (compute and exchange not split)"},
             {"type", halo::to_string(layer.type)},
             {"in_dim", layer.in_dim},
             {"out_dim", layer.out_dim},
             {"aggregate_first", layer.aggregate_first()},
             {"total_ms", {{"max", tot.max}, {"mean", tot.mean}, {"max_rank", tot.max_rank}}},
             {"compute_ms", {{"max", comp.max}, {"mean", comp.mean}, {"max_rank", comp.max_rank}}},
             {"exchange_ms", {{"max", exch.max}, {"mean", exch.mean}}},
             {"waiting_ms", {{"max", wait.max}, {"mean", wait.mean}}},
             {"skew_ms", {{"max", skew.max}, {"mean", skew.mean}}},
             {"exchanged_bytes_per_rank", {{"max", bytes.max}, {"mean", bytes.mean}}},
             {"fp32_exchange_bytes_per_rank",
              {{"max", fp32_bytes.max}, {"mean", fp32_bytes.mean}}}});
    }
    return layers_json;
}

// Device memory by component (docs/ENGINE.md "Memory accounting"): printed by rank 0, and
// returned for the manifest with the maximum total over ranks and the out-of-core copy rate.
nlohmann::json report_memory(Job& job, const halo::Engine& engine)
{
    const auto memory = engine.memory_report();
    const auto memory_total =
        reduce_stat(job.world.comm(), static_cast<double>(memory.total()), job.size);
    // Out of core: bytes between host and device over the layers' wall time (the copies run
    // beside the compute, so their own duration is not observable from the host; this is a lower
    // bound of their rate, and the bus's share of the run when compared with the pinned rate).
    double moved = 0.0;
    double moved_seconds = 0.0;
    for (const auto& t : engine.timings()) {
        moved += static_cast<double>(t.transferred_bytes);
        moved_seconds += t.total;
    }
    const auto copy_rate = reduce_stat(
        job.world.comm(), moved_seconds > 0.0 ? moved / moved_seconds / 1e9 : 0.0, job.size);
    if (job.lead) {
        fmt::print("device memory by component, rank 0 ({}; max total over ranks {}):\n{}",
                   engine.out_of_core() ? "out of core" : "in memory",
                   halo::format_bytes(static_cast<std::int64_t>(memory_total.max)),
                   halo::format_memory_report(memory));
        if (engine.out_of_core()) {
            fmt::print("  row-block copies: {:.2f} GB/s over the layers' wall time (mean over ranks)\n",
                       copy_rate.mean);
        }
    }
    auto json = nlohmann::json::parse(halo::memory_report_json(memory));
    json["max_total_over_ranks"] = memory_total.max;
    json["row_block_copy_gbps_mean"] = copy_rate.mean;
    return json;
}

// The autotuner's new choices are stored unasked (--no-save-tuning: not), so that the next run
// on this device times nothing.
void store_tuning(Job& job, const halo::Engine& engine)
{
    job.step.restart();
    const auto& o = job.o;
    const auto tuned = engine.tuning_metadata();
    const bool store = job.cuda && !o.no_save_tuning && (o.save_tuning || !tuned.empty());
    std::int64_t any_tuned = tuned.empty() ? 0 : 1;
    HALO_MPI_TRY(
        MPI_Allreduce(MPI_IN_PLACE, &any_tuned, 1, MPI_INT64_T, MPI_MAX, job.world.comm()));
    int store_any = store && any_tuned > 0 ? 1 : 0;
    HALO_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &store_any, 1, MPI_INT, MPI_MAX, job.world.comm()));
    if (store_any == 1) {
        save_tuning(job.world, o.dataset, tuned, job.lead, o.save_tuning);
    }
    job.phases.add("tuning store", job.step.seconds(), -1.0,
                   store_any == 1 ? "autotune choices into the dataset" : "nothing to store");
}

// What the reports after the runs found, for the manifest and the summary.
struct Reports {
    std::array<std::int64_t, 2> totals{0, 0};  // evaluation nodes: correct, evaluated
    double exchanged_total = 0.0;              // bytes over all ranks and layers
    double fp32_total = 0.0;                   // the same as fp32 rows
    nlohmann::json layers;                     // per-layer rows
    nlohmann::json memory;                     // rank 0's device memory by component
    nlohmann::json phases;                     // the phase table
    Stat load;                                 // dataset read and plan check, over ranks
    std::string memory_line;                   // the CUDA pool's usage (empty on the CPU)
};

// The manifest (rank 0, after every rank wrote its piece): the job's settings, medians, per-layer
// and phase rows, rank 0's device memory, the accuracy, and the pieces.
void write_manifest(const Job& job, const std::string& command, const halo::DatasetInfo& info,
                    const halo::Model& model, const halo::Exchange& exchange,
                    const halo::Engine& engine, bool step_timing, const Runs& runs,
                    const Reports& reports)
{
    const auto& o = job.o;
    nlohmann::json manifest;
    manifest["format"] = halo::result_manifest_format;
    manifest["version"] = halo::result_format_version;
    manifest["dataset"] = std::filesystem::absolute(o.dataset).string();
    manifest["model"] = o.model.empty() ? "random:" + o.layer + ":" + o.random_model : o.model;
    manifest["seed"] = o.seed;
    manifest["backend"] = o.backend;
    manifest["exchange"] = exchange.name();
    manifest["nccl_registered"] = exchange.registered();
    manifest["overlap"] = !o.no_overlap;
    manifest["overlap_mode"] = o.no_overlap ? "none" : o.overlap;
    manifest["split_share"] = o.split_share;
    manifest["exchange_barrier"] = o.exchange_barrier;
    manifest["exchange_pieces"] = exchange.pieces();
    manifest["spmm"] = !o.spmm.empty() ? o.spmm : job.cuda ? "auto" : "reference";
    manifest["attention"] = o.attention;
    manifest["int8_features"] = o.int8_features;
    // Rank 0's choice (--input-transform); empty note: dense (no sparse input was set up).
    manifest["input_transform"] = {{"option", o.input_transform},
                                   {"note", engine.sparse_input_note()}};
    manifest["step_timing"] = step_timing;
    manifest["cuda_graph"] = engine.replayed();
    manifest["num_parts"] = job.size;
    manifest["num_nodes"] = info.num_nodes;
    manifest["output_dim"] = model.output_dim();
    manifest["created_by"] = "halo-infer: " + command;
    manifest["run_seconds_median"] = runs.median_seconds;
    manifest["forward_seconds_median"] = runs.forward_median_seconds;
    manifest["repeat"] = o.repeat;
    manifest["synced"] = !o.no_sync;
    manifest["layers"] = reports.layers;
    manifest["phases"] = reports.phases;
    // Rank 0's device memory by component, the maximum total over ranks
    manifest["device_memory"] = reports.memory;
    if (reports.totals[1] > 0) {
        manifest["accuracy"] = {
            {"eval_nodes", o.eval_nodes},
            {"evaluated", reports.totals[1]},
            {"correct", reports.totals[0]},
            {"accuracy", double(reports.totals[0]) / double(reports.totals[1])}};
    }
    nlohmann::json pieces = nlohmann::json::array();
    for (int p = 0; p < job.size; ++p) {
        pieces.push_back(
            {{"part", p}, {"file", halo::result_piece_path("", p).filename().string()}});
    }
    manifest["pieces"] = pieces;
    halo::write_file_atomic(halo::result_manifest_path(o.out), manifest.dump(2) + "\n");
}

// Rank 0's closing lines: sizes and medians, device memory, exchange volume, kernels, accuracy.
void print_summary(const Job& job, const halo::DatasetInfo& info, const halo::Model& model,
                   const halo::Engine& engine, const Runs& runs, const Reports& reports,
                   const halo::app::Stopwatch& process)
{
    const auto& o = job.o;
    fmt::print(
        "\n{} nodes on {} rank(s), backend {}, model {} ({} layers): forward {:.3f} ms, "
        "with upload and download {:.3f} ms (medians of {}), load {:.3f} s (max over "
        "ranks), total {:.2f} s\n",
        info.num_nodes, job.size, o.backend, model.name.empty() ? o.model : model.name,
        model.layers.size(), runs.forward_median_seconds * 1e3, runs.median_seconds * 1e3, o.repeat,
        reports.load.max, process.seconds());
    if (!reports.memory_line.empty()) {
        fmt::print("{}\n", reports.memory_line);
    }
    if (reports.fp32_total > 0.0) {
        fmt::print(
            "halo exchange: {:.3f} MB moved over all ranks and layers, {:.3f} MB as "
            "fp32 rows would be ({:.1f}% saved)\n",
            reports.exchanged_total / 1e6, reports.fp32_total / 1e6,
            100.0 * (1.0 - reports.exchanged_total / reports.fp32_total));
    }
    if (const auto kernels = engine.kernel_report(); !kernels.empty()) {
        fmt::print("SpMM kernels chosen on rank 0:\n{}", kernels);
    }
    if (reports.totals[1] > 0) {
        fmt::print("accuracy on {}: {:.4f} ({} of {})\n", o.eval_nodes,
                   double(reports.totals[0]) / double(reports.totals[1]), reports.totals[0],
                   reports.totals[1]);
    }
    fmt::print("results in {}/ (manifest.json written last)\n", o.out);
}

// On a CUDA backend: rank 0's pool usage and the peak over ranks (collective), else empty.
// NCCL's registered buffers (--nccl-register) are outside the pool: their bytes follow.
std::string device_memory_line(const Job& job, const halo::BackendInstance& backend,
                               const halo::HaloExchanger& exchanger)
{
#ifdef HALO_HAVE_CUDA
    if (backend.context) {
        const auto peak = reduce_stat(job.world.comm(),
                                      static_cast<double>(backend.context->peak_bytes()), job.size);
        const auto registered = reduce_stat(
            job.world.comm(), static_cast<double>(exchanger.stats().registered_bytes), job.size);
        return fmt::format(
            "device memory: rank 0 {}; pool peak over ranks max {:.2f} GiB, "
            "mean {:.2f} GiB{}",
            backend.context->memory_report(), peak.max / (1 << 30), peak.mean / (1 << 30),
            registered.max > 0
                ? fmt::format("; registered with NCCL besides (outside the pool): max {:.2f} "
                              "GiB, mean {:.2f} GiB",
                              registered.max / (1 << 30), registered.mean / (1 << 30))
                : "");
    }
#endif
    static_cast<void>(job);
    static_cast<void>(backend);
    static_cast<void>(exchanger);
    return {};
}

// `process` times the whole process (from main's first line); `mpi_seconds` is MPI's start.
int run(halo::MpiWorld& world, const Options& o, const std::string& command,
        const halo::app::Stopwatch& process, double mpi_seconds)
{
    Job job(world, o);
    const int rank = job.rank;
    const int size = job.size;
    auto& phases = job.phases;
    phases.add("mpi start", mpi_seconds);
    if (job.lead) {
        if (const auto advice = halo::app::core_binding_advice(world.local_size());
            !advice.empty()) {
            fmt::print(stderr, "halo-infer: note: {}\n", advice);
        }
    }

    // The rank count must match the dataset: every rank reads the root attributes and decides
    // alike, so a mismatch is reported once and every rank exits without any collective.
    job.step.restart();
    const auto info = halo::read_dataset_info(o.dataset);
    const double info_seconds = job.step.seconds();
    if (info.num_parts != size) {
        HALO_THROW(halo::InputError, o.dataset, " has ", info.num_parts, " parts but the job has ",
                   size, " rank", size == 1 ? "" : "s", ": run with mpirun -np ", info.num_parts,
                   ", or partition again with --parts ", size);
    }
    const auto model = load_model(job, info);

    // The backend first, so that the features can go to the device while the part is read;
    // declared before the engine, whose device memory goes back to the context's pool before the
    // context goes.
    job.step.restart();
    auto spec = backend_spec(o);
    spec.local_rank = world.local_rank();
    spec.local_size = world.local_size();
    const auto backend = halo::make_backend(spec);
    phases.add("device start", job.step.seconds(), -1.0,
               job.cuda ? "CUDA context, streams, library handles" : "cpu backend");

    // Load and check this rank's part, then the halo plans across ranks (before any exchange).
    job.step.restart();
    auto upload = feature_upload(job, info, *backend.backend);
    halo::ShardReadOptions read_options;
    if (upload) {
        read_options.features = upload->callback();
    }
    const auto shard = halo::read_shard(o.dataset, rank, read_options);
    std::optional<halo::Matrix> uploaded;
    if (upload) {
        uploaded = upload->take(shard.num_owned, info.feature_dim);
    }
    const double read_seconds = info_seconds + job.step.seconds();
    phases.add("dataset read", read_seconds, stored_bytes(shard, info),
               read_note(info, upload.get()));
    job.step.restart();
    halo::check_halo_plan(world.comm(), shard, o.dataset);
    const double check_seconds = job.step.seconds();
    phases.add("halo plan check", check_seconds, -1.0, "collective");
    const double load_seconds = read_seconds + check_seconds;

    // The exchange.
    job.step.restart();
    auto exchange_spec = halo::parse_exchange_spec(o.exchange);
    exchange_spec.fixed_device = o.device >= 0;
    exchange_spec.registration = halo::parse_registration(o.nccl_register);
    if (o.exchange_pieces > 0) {
        exchange_spec.pieces = o.exchange_pieces;
    }
    const auto exchange = halo::make_exchanger(exchange_spec, world, shard, model.exchange_width(),
                                               backend.context.get());
    if (job.lead && !exchange->note().empty()) {
        fmt::print("{}\n", exchange->note());
    }
    phases.add("exchange setup", job.step.seconds(), -1.0,
               size == 1 ? "single part"
                         : exchange->transport() + (exchange->registered() ? ", registered" : ""));
    const auto eopt = engine_options(job, info);
    job.step.restart();
    halo::Engine engine(*backend.backend, exchange->exchanger(), shard, model, eopt);
    const double setup_seconds = job.step.seconds();
    phases.add("operators", engine.operator_seconds(), -1.0,
               "host: degrees, self-loops, normalized values where built");
    phases.add("plans", setup_seconds - engine.operator_seconds(), -1.0,
               "operators to the device, kernel setup");

    // Sparse dataset features (bag-of-words rows): the first layer's transforms as an SpMM.
    if (o.input_transform != "dense" && !o.int8_features && info.feature_dim > 0 &&
        !engine.out_of_core()) {
        job.step.restart();
        const double density = o.input_transform == "sparse" ? 1.0 : kSparseInputDensity;
        const auto csr =
            halo::sparse_rows(shard.features.data(), shard.num_owned, info.feature_dim, density);
        if (csr) {
            engine.set_sparse_input(*csr);  // its note says whether the SpMM is used
        }
        job.phases.add("sparse input", job.step.seconds(), -1.0,
                       csr ? engine.sparse_input_note()
                           : fmt::format("features denser than {:.0f}%: first-layer transforms "
                                         "dense",
                                         100.0 * density));
    }
    auto runs = run_repeats(job, engine, shard, info, model, uploaded);
    const auto prediction = write_piece(job, engine, *backend.backend, shard, model, runs);
    job.step.restart();
    Reports reports;
    reports.totals = accuracy(job, shard, info, prediction);
    reports.layers = report_layers(job, engine, model, eopt.step_timing, reports.exchanged_total,
                                   reports.fp32_total);
    if (job.lead && engine.replayed()) {
        fmt::print(
            "(the forward pass was replayed as one CUDA graph: {:.3f} ms for all layers, "
            "not measured per layer; --no-cuda-graph measures each layer)\n",
            runs.forward_median_seconds * 1e3);
    } else if (job.lead && !eopt.step_timing) {
        fmt::print(
            "(one synchronization per layer: compute, exchange and waiting are not split; "
            "--step-timing splits them)\n");
    }
    reports.load = reduce_stat(world.comm(), load_seconds, size);
    reports.memory_line = device_memory_line(job, backend, exchange->exchanger());
    reports.memory = report_memory(job, engine);
    phases.add("reports", job.step.seconds(), -1.0, "accuracy, per-layer and memory reductions");
    store_tuning(job, engine);
    reports.phases = halo::app::report_phases(world.comm(), phases, process.seconds(), job.lead);

    check_dataset_unchanged(o);
    // Every piece is written once this collective returns on rank 0 (each rank wrote before it).
    int ok = 1;
    int all_ok = 0;
    HALO_MPI_TRY(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, world.comm()));
    if (rank == 0 && all_ok == 1) {
        write_manifest(job, command, info, model, *exchange, engine, eopt.step_timing, runs,
                       reports);
    }
    if (job.lead) {
        print_summary(job, info, model, engine, runs, reports, process);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    const halo::app::Stopwatch process;
    halo::app::fail_writes_past_file_size_limit();
    Options o;
    CLI::App app{"halo-infer: distributed layer-wise GNN inference, one rank per dataset part"};
    app.add_option("dataset", o.dataset, "dataset written by halo-partition")->required();
    auto* model = app.add_option("--model", o.model, "HDF5 model file");
    auto* random = app.add_option("--random-model", o.random_model,
                                  "random model with these widths, input first (e.g. 128,128,64)");
    model->excludes(random);
    app.add_option("--layer", o.layer,
                   "layer type of --random-model: gcn | sage | gin | linear | maxk | agnn | "
                   "transformer | gat")
        ->check(
            CLI::IsMember({"gcn", "sage", "gin", "linear", "maxk", "agnn", "transformer", "gat"}))
        ->capture_default_str();
    app.add_option("--k", o.k, "entries kept per row by --random-model maxk layers")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    app.add_option("--heads", o.heads, "heads of --random-model transformer and gat layers")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    app.add_option("--attention", o.attention,
                   "kernel of agnn and transformer layers: fused (Fused3S, fp16 tensor cores, "
                   "approximate; on --backend cuda) | exact (fp32; gat always runs exact)")
        ->check(CLI::IsMember({"fused", "exact"}))
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed of random weights and random input features")
        ->capture_default_str();
    app.add_option("--out", o.out, "output directory (one piece per rank + manifest.json)")
        ->required();
    app.add_option("--backend", o.backend, "cpu | cuda")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    app.add_option("--exchange", o.exchange,
                   "halo exchange: nccl (default with --backend cuda) | mpi (the cpu backend's; "
                   "with cuda host-staged or CUDA-aware MPI); append -int8, or give int8 alone "
                   "for the default transport, to send rows as int8 with a scale and zero "
                   "point per row (approximate, ~1/4 of the bytes)")
        ->check(CLI::IsMember({"nccl", "mpi", "int8", "nccl-int8", "mpi-int8"}));
    app.add_option("--nccl-register", o.nccl_register,
                   "NCCL user buffer registration: the matrices the exchange moves are "
                   "allocated with ncclMemAlloc and registered, so that NCCL copies each halo "
                   "row once, straight from the sender's buffer into the receiver's "
                   "(docs/ENGINE.md). auto: where every rank can register, else NCCL's own "
                   "buffers with a note; on: required; off: never")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    app.add_option("--exchange-pieces", o.exchange_pieces,
                   "NCCL: move each exchange in this many pieces, packing the send rows of one "
                   "while the previous one moves (default 2; 1: pack all rows, then send; "
                   "docs/ENGINE.md)")
        ->check(CLI::Range(1, 64));
    app.add_option("--spmm", o.spmm,
                   "SpMM kernel of --backend cuda: " + halo::spmm_kernel_help(halo::spmm_use_infer))
        ->check([](const std::string& v) {
            try {
                static_cast<void>(halo::parse_spmm_choice(v));
            } catch (const halo::InputError& e) {
                return e.message();
            }
            return std::string();
        });
    app.add_flag("--save-tuning", o.save_tuning,
                 "with --spmm autotune: store the choices in the dataset (kernels/autotune of "
                 "each part) and fail if that fails; they are stored by default anyway, where the "
                 "dataset is writable, so later runs on the same device skip the timing");
    app.add_flag("--no-save-tuning", o.no_save_tuning,
                 "do not store the autotuner's choices in the dataset")
        ->excludes("--save-tuning");
    app.add_flag("--ignore-kernel-metadata", o.ignore_kernel_metadata,
                 "do not use the kernel metadata stored in the dataset (partition and time "
                 "again)");
    app.add_option("--device", o.device,
                   "CUDA device of every rank (default: local rank modulo the visible devices)")
        ->check(CLI::Range(0, 1024));
    app.add_flag("--int8-features", o.int8_features,
                 "keep the dataset's int8 features (halo-partition --quantize int8) int8 on the "
                 "backend: the first layer exchanges and aggregates them as int8, dequantized "
                 "in the SpMM's gather (exact, or AES with --spmm aes:W)");
    app.add_flag("--save-layers", o.save_layers, "also store every layer's output");
    auto* no_overlap =
        app.add_flag("--no-overlap", o.no_overlap,
                     "finish the halo exchange before aggregating any row (for measurements)");
    app.add_option("--overlap", o.overlap,
                   "what gcn, sage and gin layers aggregate while halo rows travel: interior "
                   "(the rows without halo columns), split (every row's local columns, then the "
                   "halo columns added: hides more where few rows are interior; rounding "
                   "differs), auto (split on cuda, interior on cpu)")
        ->check(CLI::IsMember({"auto", "interior", "split"}))
        ->capture_default_str()
        ->excludes(no_overlap);
    app.add_option("--split-share", o.split_share,
                   "with the split overlap: the share (0 to 1) of the boundary rows' local "
                   "nonzeros that run split (the first boundary rows: local columns during the "
                   "exchange, halo columns added after it); the other boundary rows run whole "
                   "after the exchange, one SpMM pass instead of two (1: every row split)")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    auto* layer_only =
        app.add_flag("--layer-timing-only", o.layer_timing_only,
                     "synchronize once per layer (the default; kept for scripts that name it)");
    app.add_flag("--step-timing", o.step_timing,
                 "synchronize after every step of a layer, so that the per-layer table splits "
                 "compute, exchange and waiting (costs host time on small graphs)")
        ->excludes(layer_only);
    app.add_flag("--exchange-barrier", o.exchange_barrier,
                 "wait for the device and for every rank before each halo exchange, so that it "
                 "starts on all ranks at once (what --step-timing does besides its other waits; "
                 "for measurements, docs/ENGINE.md)");
    app.add_flag("--cuda-graph", o.cuda_graph,
                 "require the forward pass to be recorded as a CUDA graph on the second --repeat "
                 "run and replayed (the default wherever it applies: one CUDA rank, no "
                 "--save-layers, no --step-timing); an error where it cannot apply");
    app.add_flag("--no-cuda-graph", o.no_cuda_graph, "never record or replay the forward pass")
        ->excludes("--cuda-graph");
    app.add_option("--input-transform", o.input_transform,
                   "the first layer's transforms of the dataset's features (x W): auto (as an "
                   "SpMM of the nonzeros where at most 10% of the features are nonzero, e.g. "
                   "bag-of-words rows), sparse (always as an SpMM), dense (always a GEMM)")
        ->check(CLI::IsMember({"auto", "dense", "sparse"}));
    app.add_flag("--sync-layers", o.sync_layers,
                 "barrier before every layer, so per-layer times exclude the ranks' arrival "
                 "skew (for measurements)");
    app.add_option("--device-memory-limit", o.device_memory_limit,
                   "device memory the engine may use, with units (24GiB, 1.5GB); a larger "
                   "working set runs over row blocks from host memory (default: the backend's "
                   "free memory minus a margin; none on the CPU backend)");
    app.add_flag("--out-of-core", o.out_of_core,
                 "run over row blocks even when the shard fits (needs a limit on the CPU "
                 "backend)");
    auto* pattern_flag = app.add_flag(
        "--stream-operator-pattern", o.stream_pattern,
        "out of core: where the operator's values are row and column scalings of its pattern "
        "(gcn, mean), copy the pattern alone and make the values on the device, also where that "
        "gathers a column scaling per nonzero (by default: the pattern where it does not, one "
        "part whose gcn layers scale z once per layer or a row scaling alone, else the values)");
    app.add_flag("--stream-operator-values", o.stream_values,
                 "out of core: copy a scaled operator's values with its pattern, always")
        ->excludes(pattern_flag);
    app.add_flag("--host-operator-values", o.host_values,
                 "build the gcn and mean operators' values on the host and upload them (by "
                 "default the CUDA backend's cuSPARSE plans take the pattern and make the "
                 "values on the device from row and column scalings)");
    app.add_flag("--pattern-operators", o.pattern_operators,
                 "cuda: MergePath, row-split and Accel-GCN plans keep the gcn operator as its "
                 "pattern and its row and column scalings, with no values array (4 bytes per "
                 "nonzero less device memory, about 9% slower gcn layers; the mean operator of "
                 "sage is kept so always)");
    app.add_flag("--l2-hints", o.l2_hints,
                 "cuda: MergePath (of --spmm auto, autotune, mergepath) loads the X rows of "
                 "rarely read columns with L2 evict_first and the most-read ones with evict_last "
                 "where X is past 32x the L2: 9-10% faster SpMM on R-MAT 22 and 24 on an H200, "
                 "for a hot-column pass at setup (about 50 ms per plan on R-MAT 22); pays where "
                 "the plans run tens of times (--repeat, serving)");
    app.add_option("--eval-nodes", o.eval_nodes,
                   "node ids (one per line) to report accuracy on, against the dataset's labels");
    app.add_option("--repeat", o.repeat, "run inference this many times, report the median")
        ->check(CLI::Range(1, 10000))
        ->capture_default_str();
    app.add_flag("--no-sync", o.no_sync,
                 "rename the result pieces into place without flushing them to disk first: the "
                 "write takes the page cache's time, not the disk's, but a power loss soon after "
                 "may lose pieces that the manifest names (docs/FORMAT.md, \"Results\")");
    app.add_flag("-q,--quiet", o.quiet, "print nothing but errors");
    // Options are parsed and checked before MPI starts; what failed is reported once, by rank 0,
    // after MPI_Init, and every rank then finalizes cleanly and exits 1 (no MPI_Abort).
    std::optional<CLI::ParseError> parse_error;
    std::string option_error;
    try {
        app.parse(argc, argv);
        if (o.model.empty() && o.random_model.empty()) {
            throw CLI::RequiredError("--model or --random-model");
        }
        check_options(o);
    } catch (const CLI::ParseError& e) {
        parse_error = e;
    } catch (const halo::Error& e) {
        option_error = e.message();
    }
    std::unique_ptr<halo::MpiWorld> world;
    double mpi_seconds = 0.0;
    try {
        world = std::make_unique<halo::MpiWorld>(&argc, &argv);
        mpi_seconds = process.seconds();
        if (!parse_error && option_error.empty()) {
            check_job_size(o, world->size());
        }
    } catch (const halo::InputError& e) {
        option_error = e.message();
    } catch (const std::exception& e) {
        fmt::print(stderr, "halo-infer: cannot start MPI: {}\n", e.what());
        return 1;
    }
    if (parse_error) {
        return world->rank() == 0 ? app.exit(*parse_error) : parse_error->get_exit_code();
    }
    if (!option_error.empty()) {
        if (world->rank() == 0) {
            fmt::print(stderr, "halo-infer: error: {}\n", option_error);
        }
        return 1;
    }
    const auto command = halo::app::command_line(argc, argv);
    install_termination_report(world->rank());
    std::optional<OutputLock> lock;
    try {
        // Rank 0 locks --out for the job; a refusal is reported once and every rank exits 1.
        std::string lock_error;
        if (world->rank() == 0) {
            try {
                std::filesystem::create_directories(o.out);
                lock.emplace(o.out);
            } catch (const halo::Error& e) {
                lock_error = e.message();
            } catch (const std::filesystem::filesystem_error& e) {
                lock_error = e.what();
            }
        }
        int locked = lock_error.empty() ? 1 : 0;
        HALO_MPI_TRY(MPI_Bcast(&locked, 1, MPI_INT, 0, world->comm()));
        if (locked == 0) {
            if (world->rank() == 0) {
                fmt::print(stderr, "halo-infer: error: {}\n", lock_error);
            }
            return 1;
        }
        if (world->rank() == 0) {
            // A manifest from an earlier run must not survive into this one.
            std::filesystem::remove(halo::result_manifest_path(o.out));
        }
        o.dataset_identity = file_identity(o.dataset);
        std::string input_error;
        try {
            check_inputs(o, world->size());
        } catch (const halo::Error& e) {
            input_error = e.message();
        }
        int first_failed = input_error.empty() ? world->size() : world->rank();
        HALO_MPI_TRY(
            MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, world->comm()));
        if (first_failed < world->size()) {
            if (world->rank() == first_failed) {
                fmt::print(stderr, "halo-infer: error: {}\n", input_error);
            }
            return 1;
        }
        return run(*world, o, command, process, mpi_seconds);
    } catch (const halo::InputError& e) {
        // Input errors found alike on every rank (rank count, model shape) need no abort; others
        // may be local to one rank, and abort the job so that no rank waits for it.
        const bool collective = e.message().find(" parts but the job has ") != std::string::npos;
        if (collective) {
            if (world->rank() == 0) {
                fmt::print(stderr, "halo-infer: error: {}\n", e.message());
            }
            return 1;
        }
        world->abort(fmt::format("halo-infer: error: {}", e.message()));
    } catch (const halo::Error& e) {
        world->abort(fmt::format("halo-infer: error: {}", e.message()));
    } catch (const std::exception& e) {
        world->abort(fmt::format("halo-infer: error: {}", e.what()));
    }
}
