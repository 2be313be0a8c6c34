#include "halo/engine/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>

#include "engine_impl.hpp"
#include "halo/core/detail/counter_random.hpp"
#include "halo/core/detail/parallel_copy.hpp"
#include "halo/core/error.hpp"
#include "halo/core/layer_type.hpp"

namespace halo {

using detail::seconds_since;

namespace {

// out[r, :] = the seeded features of global_ids[r] (random_node_features, in place).
void fill_random_features(const std::vector<global_id>& global_ids, std::int64_t dim,
                          std::uint64_t seed, float* out)
{
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(global_ids.size()); ++r) {
        for (std::int64_t j = 0; j < dim; ++j) {
            out[r * dim + j] = detail::random_feature(seed, global_ids[r], dim, j);
        }
    }
}

}  // namespace

std::vector<float> random_node_features(const std::vector<global_id>& global_ids, std::int64_t dim,
                                        std::uint64_t seed)
{
    std::vector<float> x(global_ids.size() * static_cast<std::size_t>(dim));
    fill_random_features(global_ids, dim, seed, x.data());
    return x;
}

Engine::Impl::Impl(Backend& b, HaloExchanger& e, const Shard& s, const Model& m, EngineOptions o)
    : model(m), options(std::move(o)), ctx(b, e, s, model, options)
{
    validate_model(model, "model");
    memory_limit = options.device_memory_limit > 0 ? options.device_memory_limit
                                                   : ctx.backend.default_memory_limit();
    const auto act = options.activations;
    if (act != FeatureType::fp32 && !ctx.backend.stores_activations(act)) {
        HALO_THROW(InputError, "--activations ", to_string(act), ": the ", ctx.backend.name(),
                   " backend does not store 16-bit activations yet (docs/KERNELS.md, \"16-bit "
                   "activations\"); run with --activations fp32, or on --backend cpu");
    }
    if (use_row_blocks()) {
        if (act != FeatureType::fp32) {
            HALO_THROW(InputError, "--activations ", to_string(act),
                       " does not run out of core (row blocks) yet: raise "
                       "--device-memory-limit, drop --out-of-core, or run with --activations "
                       "fp32");
        }
        if (options.after_layer) {
            HALO_THROW(InputError,
                       "each layer's rows (halo-infer --checkpoint) are not kept out of core; "
                       "raise --device-memory-limit, or run without --checkpoint");
        }
        start_row_blocks();
        return;
    }
    for (std::size_t l = 0; l < model.layers.size(); ++l) {
        const auto& layer = model.layers[l];
        try {
            steps.push_back(detail::layer_kind(layer.type).make(layer, ctx));
        } catch (const LogicError& e) {
            // An internal check that failed is a bug, never the user's input: say so, and
            // where (the layer, and the message naming the operator, kernel and block).
            HALO_THROW(LogicError, "internal error (a bug: please report this message) in "
                       "layer ", l, " (", to_string(layer.type), ", ", layer.in_dim, " -> ",
                       layer.out_dim, ") on ", ctx.backend.name(), ": ", e.message());
        }
    }
    ctx.decide_storage();
    ctx.allocate_shared();
}

DenseView<float> Engine::Impl::output_view(int buffer)
{
    return ctx.view(buffer, ctx.n_owned, model.output_dim());
}

DenseView<float> Engine::Impl::deferred_output()
{
    HALO_EXPECTS(deferred >= 0, "no run left its output on the backend (defer_download)");
    return output_view(deferred);
}

std::span<const float> Engine::Impl::download(int buffer)
{
    const auto count = static_cast<std::size_t>(ctx.n_owned * model.output_dim());
    if (host_output_size != count) {
        host_output.reset(new float[count > 0 ? count : 1]);
        host_output_size = count;
    }
    ctx.backend.copy_to_host(output_view(buffer), host_output.get());
    return {host_output.get(), count};
}

bool Engine::Impl::packed_input(std::size_t first) const
{
    return ctx.packed() && first < model.layers.size();
}

DenseView<float> Engine::Impl::input_view(std::size_t first)
{
    const auto w = first == 0 ? model.input_dim() : model.layers[first - 1].out_dim;
    // In 16 bits the input is stored from the scratch into buffer 0 (store_input).
    return packed_input(first) ? ctx.scratch(ctx.n_owned, w) : ctx.view(0, ctx.n_owned, w);
}

void Engine::Impl::store_input(std::size_t first)
{
    if (options.activations == FeatureType::fp32 || first >= model.layers.size()) {
        return;  // fp32, or a run from past the last layer: its input is the fp32 output
    }
    ctx.begin_input(first);
    const auto w = model.layers[first].in_dim;
    if (packed_input(first)) {
        ctx.store_features(ctx.scratch(ctx.n_owned, w), {}, Activation::none,
                           ctx.fview(0, ctx.n_owned, w));
        return;
    }
    ctx.store(ctx.view(0, ctx.n_owned, w));
}

std::vector<float> Engine::Impl::layer_rows(std::size_t l, int buffer)
{
    const auto w = model.layers[l].out_dim;
    std::vector<float> host(static_cast<std::size_t>(ctx.n_owned * w));
    auto rows = ctx.view(buffer, ctx.n_owned, w);
    if (ctx.packed() && l + 1 < model.layers.size()) {  // 16 bits, widened on the way out
        rows = ctx.scratch(ctx.n_owned, w);
        ctx.backend.widen_features(ctx.fview(buffer, ctx.n_owned, w), rows);
    }
    ctx.backend.copy_to_host(rows, host.data());
    return host;
}

void Engine::Impl::store_output(std::size_t l, int buffer)
{
    if (ctx.packed()) {
        return;  // every packed step stored what it wrote
    }
    // The layer types that widen 16-bit activations (attention, maxk) store their output here;
    // the others stored every matrix they wrote already, and rounding again changes nothing.
    if (l + 1 < model.layers.size()) {
        ctx.store(ctx.view(buffer, ctx.n_owned, model.layers[l].out_dim));
    }
}

int Engine::Impl::forward(std::size_t l, int in, LayerTiming& t)
{
    ctx.begin_layer(l, l + 1 == model.layers.size());
    if (ctx.packed() && !detail::layer_kind(model.layers[l].type).packs_16bit) {
        return forward_widened(l, in, t);
    }
    return step_on(l, in, t);
}

int Engine::Impl::step_on(std::size_t l, int in, LayerTiming& t)
{
    int free_buffer[3];
    for (int k = 0, f = 0; k < 4; ++k) {
        if (k != in) {
            free_buffer[f++] = k;
        }
    }
    return steps[l]->forward(ctx, {in, free_buffer[0], free_buffer[1], free_buffer[2]}, t);
}


// A layer type that widens 16-bit activations (maxk, the attention types) in a run stored in 16
// bits: its input widened into fp32 rows of another buffer, its fp32 step on them (the 16-bit
// buffer free for it), its output stored in 16 bits into a buffer it does not occupy (fp32 in
// the last layer): the definition's rounded input, fp32 layer and stored output.
int Engine::Impl::forward_widened(std::size_t l, int in, LayerTiming& t)
{
    const auto& layer = model.layers[l];
    const auto n = ctx.n_owned;
    const int wide = in == 0 ? 1 : 0;
    ctx.timed(t, [&] {
        ctx.backend.widen_features(ctx.fview(in, n, layer.in_dim), ctx.view(wide, n, layer.in_dim));
    });
    const int out = step_on(l, wide, t);
    if (l + 1 == model.layers.size()) {
        return out;
    }
    const int stored = out == 0 ? 1 : 0;
    ctx.timed(t, [&] {
        ctx.store_features(ctx.view(out, n, layer.out_dim), {}, Activation::none,
                           ctx.fview(stored, n, layer.out_dim));
    });
    return stored;
}

Engine::Engine(Backend& backend, HaloExchanger& exchanger, const Shard& shard, const Model& model,
               EngineOptions options)
    : impl_(std::make_unique<Impl>(backend, exchanger, shard, model, std::move(options)))
{
}

Engine::~Engine() = default;

bool Engine::out_of_core() const
{
    return impl_->row_blocks != nullptr;
}

std::vector<float> Engine::run(const std::vector<float>& features)
{
    const auto out = forward(features);
    return {out.begin(), out.end()};
}

std::vector<float> Engine::run(const QuantizedView& features)
{
    const auto out = forward(features);
    return {out.begin(), out.end()};
}

std::vector<float> Engine::run_random(std::uint64_t seed)
{
    const auto out = forward_random(seed);
    return {out.begin(), out.end()};
}

std::span<const float> Engine::forward(const std::vector<float>& features)
{
    auto& im = *impl_;
    const auto in_w = im.model.input_dim();
    HALO_EXPECTS(static_cast<std::int64_t>(features.size()) == im.ctx.n_owned * in_w,
                 "features hold ", features.size(), " values, expected ", im.ctx.n_owned, " x ",
                 in_w);
    if (im.row_blocks) {
        const auto t0 = std::chrono::steady_clock::now();
        detail::parallel_copy(features.data(), static_cast<std::int64_t>(features.size()),
                  im.row_blocks->input());
        return run_row_blocks(seconds_since(t0));
    }
    const auto t0 = std::chrono::steady_clock::now();
    im.ctx.backend.copy_from_host(features.data(), im.input_view(0));
    im.store_input(0);
    input_seconds_ = seconds_since(t0);
    im.ctx.clear_int8_input();
    im.sparse_run = im.ctx.sparse_input() != nullptr;
    return run_layers();
}

std::span<const float> Engine::forward(const Matrix& features)
{
    auto& im = *impl_;
    const auto in_w = im.model.input_dim();
    HALO_EXPECTS(features.rows() == im.ctx.n_owned && features.cols() == in_w,
                 "features of ", features.rows(), " x ", features.cols(), ", expected ",
                 im.ctx.n_owned, " x ", in_w);
    const auto t0 = std::chrono::steady_clock::now();
    if (im.row_blocks) {
        im.ctx.backend.copy_to_host(features.view(), im.row_blocks->input());
        return run_row_blocks(seconds_since(t0));
    }
    // alpha = 1, beta = 0: a copy, bit for bit.
    im.ctx.backend.axpby(1.0f, features.view(), 0.0f, im.input_view(0));
    im.store_input(0);
    im.ctx.backend.synchronize();
    input_seconds_ = seconds_since(t0);
    im.ctx.clear_int8_input();
    im.sparse_run = im.ctx.sparse_input() != nullptr;
    return run_layers();
}

std::span<const float> Engine::forward_random(std::uint64_t seed)
{
    auto& im = *impl_;
    const auto in_w = im.model.input_dim();
    if (im.row_blocks) {
        // Out of core the layer input lives in host memory. Where the backend's memory is not
        // host memory the rows are generated there, a quarter of the limit at a time, and copied
        // down into the driver's page-locked input at the bus's speed (the host generator is
        // several times slower: 2.9 s for R-MAT 26's 17 GB on 16 cores against 0.3 s).
        const auto t0 = std::chrono::steady_clock::now();
        auto* input = im.row_blocks->input();
        const auto& ids = im.ctx.shard.global_ids;
        const auto n = im.ctx.n_owned;
        if (im.ctx.backend.uses_host_memory() || n == 0 || in_w == 0) {
            fill_random_features(ids, in_w, seed, input);
        } else {
            const auto chunk =
                std::clamp<std::int64_t>(im.memory_limit / 4 / (4 * in_w), 1, n);
            auto rows = im.ctx.backend.allocate(chunk, in_w);
            for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
                const auto view = rows.rows_view(0, std::min(chunk, n - r0));
                im.ctx.backend.fill_random_features(ids.data() + r0, seed, view);
                im.ctx.backend.copy_to_host(view, input + r0 * in_w);
            }
        }
        return run_row_blocks(seconds_since(t0));
    }
    const auto t0 = std::chrono::steady_clock::now();
    im.ctx.backend.fill_random_features(im.ctx.shard.global_ids.data(), seed, im.input_view(0));
    im.store_input(0);
    im.ctx.backend.synchronize();
    input_seconds_ = seconds_since(t0);
    im.ctx.clear_int8_input();
    im.sparse_run = false;
    return run_layers();
}

std::span<const float> Engine::forward(const QuantizedView& features)
{
    auto& im = *impl_;
    const auto in_w = im.model.input_dim();
    HALO_EXPECTS(features.rows == im.ctx.n_owned && features.cols == in_w && features.ld >= in_w,
                 "int8 features of ", features.rows, " x ", features.cols, ", expected ",
                 im.ctx.n_owned, " x ", in_w);
    if (im.row_blocks) {
        HALO_THROW(InputError,
                   "int8 features do not run out of core; dequantize them (halo-infer "
                   "without --int8-features) or raise --device-memory-limit");
    }
    if (im.options.activations != FeatureType::fp32) {
        HALO_THROW(InputError, "--activations ", to_string(im.options.activations),
                   " with int8 features (--int8-features): the first layer would gather the "
                   "int8 rows, not 16-bit ones; drop one of the two");
    }
    const auto t0 = std::chrono::steady_clock::now();
    im.ctx.load_quantized(features);
    input_seconds_ = seconds_since(t0);
    im.int8_input_host = features;
    im.sparse_run = false;
    struct Reset {
        Impl& im;
        ~Reset()
        {
            im.ctx.clear_int8_input();
            im.int8_input_host.reset();
        }
    } reset{im};
    return run_layers();
}

bool Engine::set_sparse_input(const Csr& features)
{
    auto& im = *impl_;
    const auto in_w = im.model.input_dim();
    HALO_EXPECTS(features.num_rows == im.ctx.n_owned && features.num_cols == in_w,
                 "sparse input of ", features.num_rows, " x ", features.num_cols, ", expected ",
                 im.ctx.n_owned, " x ", in_w);
    im.ctx.set_sparse_input(nullptr);
    im.recorded = false;  // a recording made with the other product is not replayed
    const auto nnz = features.nnz();
    const double density =
        im.ctx.n_owned * in_w > 0
            ? static_cast<double>(nnz) / (static_cast<double>(im.ctx.n_owned) * in_w)
            : 0.0;
    char percent[32];
    std::snprintf(percent, sizeof percent, "%.2f%%", 100.0 * density);
    const auto what = "input features: " + std::to_string(nnz) + " nonzeros of " +
                      std::to_string(im.ctx.n_owned) + " x " + std::to_string(in_w) + " (" +
                      percent + ")";
    if (im.row_blocks) {
        im.sparse_note = what + ", first-layer transforms dense (out of core)";
        return false;
    }
    if (im.options.activations != FeatureType::fp32) {
        // The sparse product would read the fp32 values, not the stored 16-bit ones.
        im.sparse_note = what + ", first-layer transforms dense (--activations " +
                         to_string(im.options.activations) + ")";
        return false;
    }
    auto plan = im.ctx.backend.make_spmm_plan(features, SpmmPlanHints{"input features", {}, {}});
    if (!plan->exact()) {
        im.sparse_note = what + ", first-layer transforms dense (the backend's SpMM " +
                         plan->algorithm() + " is not exact)";
        return false;
    }
    im.sparse_note = what + ", first-layer transforms as SpMM: " + plan->algorithm();
    im.ctx.set_sparse_input(std::move(plan));
    return true;
}

std::string Engine::sparse_input_note() const
{
    return impl_->sparse_note;
}

std::string Engine::activation_storage() const
{
    return impl_->ctx.storage_note();
}

void Engine::defer_download()
{
    impl_->defer_next = true;
}

void Engine::download_rows(std::int64_t first, std::int64_t count, float* host) const
{
    auto& im = *impl_;
    const auto rows = im.deferred_output();
    HALO_EXPECTS(first >= 0 && count >= 0 && first + count <= rows.rows, "rows [", first, ", ",
                 first + count, ") outside the ", rows.rows, " output rows");
    im.ctx.backend.copy_to_host(DenseView<const float>{rows.row(first), count, rows.cols, rows.ld},
                                host);
}

void Engine::deferred_predictions(std::int32_t* best) const
{
    auto& im = *impl_;
    im.ctx.backend.argmax_rows(im.deferred_output(), best);
}

std::span<const float> Engine::run_row_blocks(double input_seconds)
{
    auto& im = *impl_;
    im.deferred = -1;
    im.defer_next = false;  // the driver's output is in host memory already
    layer_outputs_.clear();
    replayed_ = false;
    input_seconds_ = input_seconds;
    download_seconds_ = 0.0;  // the driver's output is in host memory
    const auto out =
        im.row_blocks->run(timings_, im.options.keep_layers ? &layer_outputs_ : nullptr);
    forward_seconds_ = 0.0;
    for (const auto& t : timings_) {
        forward_seconds_ += t.total;
    }
    return out;
}

std::span<const float> Engine::forward_from(std::size_t first_layer,
                                            const std::vector<float>& input)
{
    auto& im = *impl_;
    const auto layers = im.model.layers.size();
    HALO_EXPECTS(first_layer <= layers, "first layer ", first_layer, " of ", layers);
    if (im.row_blocks) {
        HALO_THROW(InputError, "a run from layer ", first_layer,
                   " (halo-infer --resume) does not run out of core; raise "
                   "--device-memory-limit");
    }
    const auto in_w =
        first_layer == 0 ? im.model.input_dim() : im.model.layers[first_layer - 1].out_dim;
    HALO_EXPECTS(static_cast<std::int64_t>(input.size()) == im.ctx.n_owned * in_w, "input holds ",
                 input.size(), " values, expected ", im.ctx.n_owned, " x ", in_w);
    const auto t0 = std::chrono::steady_clock::now();
    im.ctx.backend.copy_from_host(input.data(), im.input_view(first_layer));
    im.store_input(first_layer);
    input_seconds_ = seconds_since(t0);
    im.ctx.clear_int8_input();
    im.sparse_run = first_layer == 0 && im.ctx.sparse_input() != nullptr;
    return run_layers(first_layer);
}

std::span<const float> Engine::run_layers(std::size_t first)
{
    auto& im = *impl_;
    im.deferred = -1;
    timings_.assign(im.model.layers.size(), {});
    layer_outputs_.clear();
    replayed_ = false;
    const bool replayable = im.options.replay && !im.ctx.has_peers && !im.options.step_timing &&
                            !im.options.keep_layers && first == 0;
    const bool int8 = im.ctx.has_int8_input();
    const bool sparse = im.sparse_run;
    // The first layer's transforms multiply the sparse input where the run's input is it.
    const auto first_layer_input = [&](std::size_t l) {
        im.ctx.use_sparse_input(l == 0 && sparse);
    };
    const auto replay = [&] {
        const auto t0 = std::chrono::steady_clock::now();
        im.ctx.backend.replay();
        im.ctx.backend.synchronize();
        forward_seconds_ = seconds_since(t0);
        im.ctx.check_stores();  // a range check on the device: its first overflow raised here
        replayed_ = true;
        return timed_download(im.recorded_out);
    };
    if (replayable && im.recorded && im.recorded_int8 == int8 && im.recorded_sparse == sparse) {
        return replay();
    }
    if (replayable && im.complete_runs > 0 && im.replay_note.empty()) {
        // Record (plans and 16-bit weights allocated what they need in the first complete run),
        // then replay the recording.
        if (im.ctx.backend.begin_capture()) {
            try {
                int cur = 0;
                for (std::size_t l = 0; l < im.model.layers.size(); ++l) {
                    first_layer_input(l);
                    cur = im.forward(l, cur, timings_[l]);
                    im.store_output(l, cur);
                    im.ctx.clear_int8_input();
                }
                im.ctx.use_sparse_input(false);
                im.ctx.backend.end_capture();
                im.recorded = true;
                im.recorded_int8 = int8;
                im.recorded_sparse = sparse;
                im.recorded_out = cur;
            } catch (const Error& e) {
                im.ctx.use_sparse_input(false);
                try {
                    im.ctx.backend.end_capture();
                } catch (const Error&) {  // the recording is dropped either way
                }
                im.replay_note = e.message();
            }
            if (im.recorded) {
                return replay();
            }
            if (int8) {
                im.ctx.load_quantized(*im.int8_input_host);  // the failed recording consumed it
            }
        } else {
            im.replay_note = "the " + im.ctx.backend.name() + " backend cannot record";
        }
    }
    int cur = 0;
    for (std::size_t l = first; l < im.model.layers.size(); ++l) {
        auto& t = timings_[l];
        if (im.options.before_layer) {
            im.options.before_layer(l);
        }
        const auto stats_before = im.ctx.exchanger.stats();
        const auto t0 = std::chrono::steady_clock::now();
        first_layer_input(l);
        struct Off {
            detail::StepContext& ctx;
            ~Off() { ctx.use_sparse_input(false); }
        } off{im.ctx};
        cur = im.forward(l, cur, t);
        im.store_output(l, cur);
        im.ctx.clear_int8_input();  // only the first layer reads the int8 rows
        im.ctx.backend.synchronize();
        im.ctx.check_stores();  // before a checkpoint takes the layer's rows
        t.total = seconds_since(t0);
        t.compute = t.spmm + t.dense;
        const auto& stats = im.ctx.exchanger.stats();
        t.exchanged_bytes = (stats.bytes_sent - stats_before.bytes_sent) +
                            (stats.bytes_received - stats_before.bytes_received);
        if (im.options.keep_layers || im.options.after_layer) {
            auto host = im.layer_rows(l, cur);
            if (im.options.after_layer) {
                im.options.after_layer(l, host);
            }
            if (im.options.keep_layers) {
                layer_outputs_.push_back(std::move(host));
            }
        }
    }
    forward_seconds_ = 0.0;
    for (const auto& t : timings_) {
        forward_seconds_ += t.total;
    }
    if (first == 0 && ++im.complete_runs == 1) {
        // The first complete run chose every plan's kernels (the autotuner timed its shapes):
        // what was tried and not kept goes back before the next run (and before a recording).
        im.ctx.backend.synchronize();
        im.ctx.release_unkept();
    }
    return timed_download(cur);
}

std::span<const float> Engine::timed_download(int buffer)
{
    auto& im = *impl_;
    if (im.defer_next) {
        im.defer_next = false;
        im.deferred = buffer;
        download_seconds_ = 0.0;
        return {};
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = im.download(buffer);
    download_seconds_ = seconds_since(t0);
    return out;
}

}  // namespace halo
