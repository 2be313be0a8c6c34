#include "halo/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "halo/detail/counter_random.hpp"
#include "halo/error.hpp"
#include "halo/maxk.hpp"
#include "row_block_driver.hpp"

namespace halo {
namespace {

// The SpMM operator of a layer type that aggregates with one (gcn, sage, gin; maxk aggregates with
// the gcn operator through its own plan).
std::optional<Aggregation> aggregation_of(LayerType type)
{
    switch (type) {
        case LayerType::gcn:
        case LayerType::maxk:
            return Aggregation::gcn;
        case LayerType::sage:
            return Aggregation::mean;
        case LayerType::gin:
            return Aggregation::sum;
        default:
            return std::nullopt;
    }
}

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<float> random_node_features(const std::vector<global_id>& global_ids, std::int64_t dim,
                                        std::uint64_t seed)
{
    std::vector<float> x(global_ids.size() * static_cast<std::size_t>(dim));
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(global_ids.size()); ++r) {
        for (std::int64_t j = 0; j < dim; ++j) {
            x[r * dim + j] = detail::random_feature(seed, global_ids[r], dim, j);
        }
    }
    return x;
}

struct Engine::Impl {
    Backend& backend;
    HaloExchanger& exchanger;
    const Shard& shard;
    Model model;
    EngineOptions options;
    std::int64_t n_owned = 0;
    std::int64_t n_total = 0;
    bool has_peers = false;
    std::int64_t rows_moved = 0;  // sent + received rows of one exchange
    std::map<Aggregation, Csr> operator_matrices;
    std::map<Aggregation, std::unique_ptr<SpmmPlan>> operators;
    std::unique_ptr<AttentionPlan> self_loop_attention;  // agnn, gat
    std::unique_ptr<AttentionPlan> adjacency_attention;  // transformer

    struct Weights {
        Matrix weight, bias, root_weight, weight2, bias2;
        Matrix projection, projection_bias;  // transformer: [Wq | Wk | Wv (| W_root)], biases
        Matrix att_src, att_dst;             // gat: block-diagonal [out_dim, heads]
        Matrix el, er;  // gat: scores of destinations (owned) and sources (all rows)
        std::unique_ptr<MaxkPlan> maxk;
    };
    std::vector<Weights> weights;
    std::vector<Matrix> buffers;  // 4 work matrices of n_total x max_dim
    Matrix wide;  // transformer: [q | k | v | skip] rows, n_total x (3 or 4) out_dim
    // int8 input (run(QuantizedView)): the rows as bytes in words, and the column parameters.
    Matrix q_rows, q_scale, q_zero;
    std::optional<QuantizedView> int8_input;  // set while the first layer runs on it
    std::map<Aggregation, std::unique_ptr<QuantizedSpmmPlan>> quantized_operators;
    std::optional<QuantizedView> int8_input_host;  // the host rows of the current run, if int8
    // EngineOptions::replay: runs so far, the recording's output buffer and input kind, and why
    // recording failed (empty: it did not).
    int runs = 0;
    bool recorded = false;
    bool recorded_int8 = false;
    int recorded_out = -1;
    std::string replay_note;
    // Out of core (issue 15): the row-block driver, and the host pattern gat attends over.
    std::unique_ptr<detail::RowBlockDriver> row_blocks;
    bool host_only = false;  // operators as host matrices only, no plans
    Csr self_loop_matrix;
    std::int64_t memory_limit = 0;

    // The output of every run lands in one host buffer, allocated uninitialized on the first run
    // and reused: a fresh zero-filled vector per run cost more in page faults and zeroing than
    // the copy itself (1.7 GB/s measured on an H200 machine, against 16 GB/s pageable).
    std::unique_ptr<float[]> host_output;
    std::size_t host_output_size = 0;
    std::vector<float> row_block_output;  // out of core: the driver's own result

    std::span<const float> download(int buffer)
    {
        const auto out_w = model.output_dim();
        const auto count = static_cast<std::size_t>(n_owned * out_w);
        if (host_output_size != count) {
            host_output.reset(new float[count > 0 ? count : 1]);
            host_output_size = count;
        }
        backend.copy_to_host(view(buffer, n_owned, out_w), host_output.get());
        return {host_output.get(), count};
    }

    Impl(Backend& b, HaloExchanger& e, const Shard& s, const Model& m, EngineOptions o)
        : backend(b),
          exchanger(e),
          shard(s),
          model(m),
          options(std::move(o)),
          n_owned(s.num_owned),
          n_total(s.num_owned + s.num_halo),
          has_peers(!s.plan.send_ranks.empty() || !s.plan.recv_ranks.empty()),
          rows_moved(s.plan.num_send() + s.plan.num_recv())
    {
        validate_model(model, "model");
        memory_limit = options.device_memory_limit > 0 ? options.device_memory_limit
                                                       : backend.default_memory_limit();
        if (use_row_blocks()) {
            start_row_blocks();
            return;
        }
        prepare_operators();
        std::int64_t wide_cols = 0;
        for (const auto& layer : model.layers) {
            weights.push_back(prepare_weights(layer));
            if (layer.type == LayerType::transformer) {
                wide_cols = std::max(wide_cols, weights.back().projection.cols());
            }
        }
        buffers.resize(4);  // allocated on first use (view()): a gcn model uses two
        if (wide_cols > 0) {
            wide = backend.allocate(n_total, wide_cols);
        }
    }

    Matrix upload(const std::vector<float>& host, std::int64_t rows, std::int64_t cols)
    {
        if (host.empty() || rows == 0 || cols == 0) {
            return {};
        }
        auto m = backend.allocate(rows, cols);
        backend.copy_from_host(host.data(), m.view());
        return m;
    }

    // [heads * d, heads]: column t holds head t's attention vector in rows [t * d, (t + 1) * d),
    // so that z * result gives every head's score of every row in one GEMM.
    Matrix block_diagonal(const std::vector<float>& att, std::int64_t heads)
    {
        const auto width = static_cast<std::int64_t>(att.size());
        const auto d = width / heads;
        std::vector<float> host(static_cast<std::size_t>(width * heads), 0.0f);
        for (std::int64_t r = 0; r < width; ++r) {
            host[r * heads + r / d] = att[r];
        }
        return upload(host, width, heads);
    }

    SpmmPlanHints hints_for(const std::string& op) const
    {
        SpmmPlanHints hints;
        hints.op = op;
        hints.ranges = {{0, shard.num_interior}, {shard.num_interior, shard.num_owned}};
        for (const auto& md : options.kernel_metadata) {
            if (md.op == hints.op) {
                hints.stored.push_back(md);
            }
        }
        return hints;
    }

    Weights prepare_weights(const Layer& layer)
    {
        Weights w;
        const auto in_w = layer.in_dim;
        const auto out_w = layer.out_dim;
        const auto mid = layer.type == LayerType::gin ? layer.hidden_dim : out_w;
        w.weight = upload(layer.weight, layer.weight.empty() ? 0 : in_w, mid);
        w.bias = upload(layer.bias, 1, layer.bias.empty() ? 0 : mid);
        if (layer.type == LayerType::sage) {  // the transformer's is part of its projection
            w.root_weight = upload(layer.root_weight, in_w, out_w);
        }
        w.weight2 = upload(layer.weight2, layer.weight2.empty() ? 0 : mid, out_w);
        w.bias2 = upload(layer.bias2, 1, layer.bias2.empty() ? 0 : out_w);
        if (layer.type == LayerType::transformer) {
            // One GEMM computes q, k, v and the skip term: the weights side by side.
            std::vector<const std::vector<float>*> blocks{&layer.query_weight, &layer.key_weight,
                                                          &layer.value_weight};
            std::vector<const std::vector<float>*> biases{&layer.query_bias, &layer.key_bias,
                                                          &layer.value_bias};
            if (!layer.root_weight.empty()) {
                blocks.push_back(&layer.root_weight);
                biases.push_back(nullptr);  // the skip bias is added with the activation
            }
            const auto width = static_cast<std::int64_t>(blocks.size()) * out_w;
            std::vector<float> weight(static_cast<std::size_t>(in_w * width));
            std::vector<float> bias(static_cast<std::size_t>(width), 0.0f);
            for (std::size_t blk = 0; blk < blocks.size(); ++blk) {
                const auto col0 = static_cast<std::int64_t>(blk) * out_w;
                for (std::int64_t r = 0; r < in_w; ++r) {
                    std::copy_n(blocks[blk]->begin() + r * out_w, out_w,
                                weight.begin() + r * width + col0);
                }
                if (biases[blk] != nullptr && !biases[blk]->empty()) {
                    std::copy_n(biases[blk]->begin(), out_w, bias.begin() + col0);
                }
            }
            w.projection = upload(weight, in_w, width);
            w.projection_bias = upload(bias, 1, width);
        }
        if (layer.type == LayerType::gat) {
            w.att_src = block_diagonal(layer.att_src, layer.heads);
            w.att_dst = block_diagonal(layer.att_dst, layer.heads);
            w.el = backend.allocate(n_owned, layer.heads);
            w.er = backend.allocate(n_total, layer.heads);
        }
        if (layer.type == LayerType::maxk) {
            if (out_w > kMaxkMaxDim) {
                HALO_THROW(InputError, "maxk layer of width ", out_w, ": the MaxK kernels take ",
                           "widths up to ", kMaxkMaxDim);
            }
            w.maxk = backend.make_maxk_plan(operator_matrices.at(Aggregation::gcn), out_w, layer.k,
                                            hints_for(kernel_operator_gcn.data()));
        }
        return w;
    }

    void prepare_operators()
    {
        std::vector<float> degree;
        for (const auto& layer : model.layers) {
            if (host_only && (layer.type == LayerType::agnn || layer.type == LayerType::gat ||
                              layer.type == LayerType::transformer)) {
                if (layer.type == LayerType::gat && self_loop_matrix.nnz() == 0) {
                    self_loop_matrix = self_loop_pattern(shard);
                }
                continue;  // the row-block driver refuses agnn and transformer layers
            }
            if (layer.type == LayerType::agnn || layer.type == LayerType::gat) {
                if (!self_loop_attention) {
                    self_loop_attention = backend.make_attention_plan(
                        self_loop_pattern(shard), model.max_dim(), options.attention,
                        hints_for(kernel_operator_gcn.data()));
                }
                continue;
            }
            if (layer.type == LayerType::transformer) {
                if (options.dataset_normalization != "none") {
                    HALO_THROW(InputError, "the dataset's adjacency is ",
                               options.dataset_normalization,
                               "-normalized, but a transformer layer attends over the raw "
                               "adjacency (no self-loops); partition with --normalize none");
                }
                if (!adjacency_attention) {
                    adjacency_attention =
                        backend.make_attention_plan(shard.csr, model.max_dim(), options.attention,
                                                    hints_for(kernel_operator_adjacency.data()));
                }
                continue;
            }
            const auto kind = aggregation_of(layer.type);
            if (!kind || operator_matrices.count(*kind) != 0) {
                continue;
            }
            if (*kind == Aggregation::gcn && options.dataset_normalization != "gcn" &&
                degree.empty()) {
                degree = exchange_degrees();
            }
            operator_matrices[*kind] =
                make_aggregation(shard, *kind, options.dataset_normalization, degree);
        }
        if (host_only) {
            return;
        }
        // SpMM plans only for the operators an SpMM layer runs (maxk has its own plan).
        for (const auto& layer : model.layers) {
            const auto kind = aggregation_of(layer.type);
            if (layer.type == LayerType::maxk || !kind || operators.count(*kind) != 0) {
                continue;
            }
            operators[*kind] = backend.make_spmm_plan(operator_matrices.at(*kind),
                                                      hints_for(kernel_operator_name(*kind)));
        }
    }

    // --- Out of core (issue 15; src/engine/row_block_driver.cpp) ---

    // Row blocks when asked for, or when the in-memory working set exceeds the limit.
    bool use_row_blocks() const
    {
        switch (options.execution) {
            case Execution::in_memory:
                return false;
            case Execution::row_blocks:
                if (memory_limit <= 0) {
                    HALO_THROW(InputError, "row-block execution needs a device memory limit (the ",
                               backend.name(), " backend has no default)");
                }
                return true;
            case Execution::automatic:
                break;
        }
        return memory_limit > 0 && in_memory_estimate().total() > memory_limit;
    }

    void start_row_blocks()
    {
        if (options.replay) {
            options.replay = false;  // nothing to record: the blocks' plans live one block long
            replay_note = "out of core";
        }
        host_only = true;
        prepare_operators();
        std::vector<const Csr*> ops;
        for (const auto& layer : model.layers) {
            const auto kind = aggregation_of(layer.type);
            ops.push_back(layer.type == LayerType::gat ? &self_loop_matrix
                          : kind                       ? &operator_matrices.at(*kind)
                                                       : nullptr);
        }
        row_blocks = std::make_unique<detail::RowBlockDriver>(
            backend, exchanger, shard, model, std::move(ops), options.attention,
            options.step_timing, options.overlap, memory_limit);
    }

    // The in-memory run's backend memory before anything is allocated: every distinct operator
    // as a CSR with values (the gcn one with a diagonal entry per row), the four work buffers
    // and the widest extra buffer, the weights. Plans' metadata and workspaces are not known
    // yet: memory_report() adds them after construction.
    MemoryReport in_memory_estimate() const
    {
        MemoryReport r;
        std::map<std::string, std::int64_t> patterns;  // distinct operators and their nonzeros
        for (const auto& layer : model.layers) {
            const auto kind = aggregation_of(layer.type);
            const auto nnz = shard.csr.nnz();
            if (kind) {
                patterns[to_string(*kind)] = nnz + (*kind == Aggregation::gcn ? n_owned : 0);
            } else if (layer.type == LayerType::agnn || layer.type == LayerType::gat) {
                patterns["self_loops"] = nnz + n_owned;
            } else if (layer.type == LayerType::transformer) {
                patterns["adjacency"] = nnz;
            }
            r.weights += static_cast<std::int64_t>(
                             layer.weight.size() + layer.bias.size() + layer.root_weight.size() +
                             layer.weight2.size() + layer.bias2.size() + layer.query_weight.size() +
                             layer.key_weight.size() + layer.value_weight.size()) *
                         4;
        }
        for (const auto& [name, nnz] : patterns) {
            r.row_pointers += 8 * (n_owned + 1);
            r.indices += 4 * nnz;
            r.values += 4 * nnz;
            r.nonzeros += nnz;
        }
        const bool gcn_only = std::all_of(model.layers.begin(), model.layers.end(),
                                          [](const Layer& l) { return l.type == LayerType::gcn; });
        r.feature_buffers =
            (gcn_only ? 2 : 4) * 4 * n_total * std::max<std::int64_t>(model.max_dim(), 1);
        r.limit = memory_limit;
        return r;
    }

    // The in-memory run's backend memory as allocated: plans that report their memory give it;
    // other plans' operators count as CSR with values; buffers as allocated.
    MemoryReport in_memory_report() const
    {
        MemoryReport r;
        auto csr_bytes = [&](const Csr& a) {
            MemoryReport c;
            c.row_pointers = 8 * (a.num_rows + 1);
            c.indices = 4 * a.nnz();
            c.values = 4 * a.nnz();
            c.nonzeros = a.nnz();
            return c;
        };
        for (const auto& [kind, plan] : operators) {
            const auto m = plan->memory();
            r += m.total() > 0 ? m : csr_bytes(operator_matrices.at(kind));
        }
        auto matrix_bytes = [](const Matrix& m) { return 4 * m.rows() * m.cols(); };
        bool maxk_operator = false;  // every maxk plan holds the gcn operator and a CBSR
        for (std::size_t l = 0; l < weights.size(); ++l) {
            const auto& w = weights[l];
            for (const auto* m : {&w.weight, &w.bias, &w.root_weight, &w.weight2, &w.bias2,
                                  &w.projection, &w.projection_bias, &w.att_src, &w.att_dst}) {
                r.weights += matrix_bytes(*m);
            }
            r.feature_buffers += matrix_bytes(w.el) + matrix_bytes(w.er);
            if (w.maxk && operator_matrices.count(Aggregation::gcn) != 0) {
                auto c = csr_bytes(operator_matrices.at(Aggregation::gcn));
                if (operators.count(Aggregation::gcn) != 0 || maxk_operator) {
                    c.nonzeros = 0;  // the same pattern: its nonzeros counted once
                }
                maxk_operator = true;
                c.kernel_metadata = 6 * n_total * model.layers[l].k;  // CBSR: k floats, k int16
                r += c;
            }
        }
        for (const auto& b : buffers) {
            r.feature_buffers += matrix_bytes(b);
        }
        r.feature_buffers += matrix_bytes(wide) + matrix_bytes(q_rows) + matrix_bytes(q_scale) +
                             matrix_bytes(q_zero);
        r.limit = memory_limit;
        return r;
    }

    // Owned gcn degrees, then the halo ones through one exchange of a width-1 matrix.
    std::vector<float> exchange_degrees()
    {
        auto degree = gcn_degrees(shard);
        degree.resize(n_total, 0.0f);
        auto column = backend.allocate(n_total, 1);
        backend.copy_from_host(degree.data(), column.view());
        exchanger.start(column.view());
        exchanger.finish();
        backend.copy_to_host(column.view(), degree.data());
        return degree;
    }

    // Contiguous rows x cols view over buffer k (which holds n_total * max_dim floats),
    // allocated on its first use (the first run() allocates every buffer a run uses, so that a
    // recording for replay allocates nothing).
    DenseView<float> view(int k, std::int64_t rows, std::int64_t cols)
    {
        if (buffers[k].data() == nullptr) {
            buffers[k] = backend.allocate(n_total, std::max<std::int64_t>(model.max_dim(), 1));
        }
        return {buffers[k].data(), rows, cols, cols};
    }

    // Exchanges the halo rows of `exchanged` while compute(interior rows) runs, then, once they
    // arrived and arrived() prepared them, runs compute(boundary rows); without overlap the
    // exchange completes first and compute runs once over all owned rows. `width` is the
    // logical row width, for the fp32-equivalent byte count.
    template <typename Compute, typename Arrived>
    void exchange_and_compute(DenseView<float> exchanged, std::int64_t width, Compute&& compute,
                              Arrived&& arrived, LayerTiming& t)
    {
        const RowRange interior = shard.interior_rows();
        const RowRange boundary = shard.boundary_rows();
        t.fp32_exchange_bytes += rows_moved * width * static_cast<std::int64_t>(sizeof(float));
        // A part without boundary rows (one rank) or interior rows has nothing to run there.
        auto compute_rows = [&](RowRange rows) {
            if (!rows.empty()) {
                compute(rows);
            }
        };
        if (!options.step_timing) {
            // The exchangers order their streams after the compute stream themselves (start)
            // and the compute stream after theirs (finish): no host synchronization is needed.
            exchanger.start(exchanged);
            if (options.overlap) {
                compute_rows(interior);
            }
            exchanger.finish();
            arrived();
            compute_rows(options.overlap ? boundary : RowRange{0, n_owned});
            return;
        }
        backend.synchronize();
        auto t0 = std::chrono::steady_clock::now();
        exchanger.start(exchanged);
        t.exchange += seconds_since(t0);
        if (options.overlap) {
            t0 = std::chrono::steady_clock::now();
            compute_rows(interior);
            backend.synchronize();
            t.spmm += seconds_since(t0);
        }
        t0 = std::chrono::steady_clock::now();
        exchanger.finish();
        if (!options.overlap) {
            // Nothing to overlap with: wait for the exchange itself, so that `exchange` measures
            // its duration (a device exchanger's finish() only orders the streams).
            backend.synchronize();
        }
        const double waited = seconds_since(t0);
        t.exchange += waited;
        t.waiting += waited;
        t0 = std::chrono::steady_clock::now();
        arrived();
        compute_rows(options.overlap ? boundary : RowRange{0, n_owned});
        backend.synchronize();
        t.spmm += seconds_since(t0);
    }

    // dst (owned rows) = op * src, exchanging src's halo rows, overlapping interior rows.
    void aggregate(SpmmPlan& op, DenseView<float> src, DenseView<float> dst, LayerTiming& t)
    {
        exchange_and_compute(
            src, src.cols, [&](RowRange rows) { op.run(src, dst, rows); }, [] {}, t);
    }

    // dst (owned rows) = op * dequantize(int8 input), the input's halo rows exchanged as int8
    // bytes (every part shares the per-column parameters, so the bytes mean the same everywhere).
    void aggregate_quantized(Aggregation kind, DenseView<float> dst, LayerTiming& t)
    {
        auto& plan = quantized_operators[kind];
        if (!plan) {
            plan = backend.make_quantized_spmm_plan(operator_matrices.at(kind), model.max_dim());
        }
        const auto& q = *int8_input;
        exchange_and_compute(
            q_rows.view(), q.cols, [&](RowRange rows) { plan->run(q, dst, rows); }, [] {}, t);
    }

    // Uploads int8 rows and parameters, dequantizes the owned rows into buffer 0 and keeps the
    // device view for the first layer.
    void load_quantized(const QuantizedView& host)
    {
        const auto cols = host.cols;
        const auto words = (cols + 3) / 4;
        if (q_rows.cols() != words) {
            q_rows = backend.allocate(n_total, words);
            q_scale = backend.allocate(1, cols);
            q_zero = backend.allocate(1, cols);
        }
        std::vector<float> staged(static_cast<std::size_t>(n_owned * words), 0.0f);
        for (std::int64_t i = 0; i < n_owned; ++i) {
            std::memcpy(reinterpret_cast<char*>(staged.data() + i * words), host.data + i * host.ld,
                        static_cast<std::size_t>(cols));
        }
        backend.copy_from_host(staged.data(), q_rows.rows_view(0, n_owned));
        backend.copy_from_host(host.scale, q_scale.view());
        std::vector<float> zero_bits(static_cast<std::size_t>(cols));
        std::memcpy(zero_bits.data(), host.zero_point, static_cast<std::size_t>(cols) * 4);
        backend.copy_from_host(zero_bits.data(), q_zero.view());
        const QuantizedView device{reinterpret_cast<const std::int8_t*>(q_rows.data()),
                                   n_total,
                                   cols,
                                   4 * words,
                                   q_scale.data(),
                                   reinterpret_cast<const std::int32_t*>(q_zero.data())};
        auto owned = device;
        owned.rows = n_owned;
        backend.dequantize(owned, view(0, n_owned, cols));
        int8_input = device;
    }

    // Column slice [first, first + cols) of a view (a head of a concatenated matrix).
    template <typename T>
    static DenseView<T> columns(DenseView<T> m, std::int64_t first, std::int64_t cols)
    {
        return {m.data + first, m.rows, cols, m.ld};
    }

    // Runs one layer from buffer `in` into another buffer; returns the output buffer index.
    int forward(std::size_t l, int in, LayerTiming& t)
    {
        const auto& layer = model.layers[l];
        auto& w = weights[l];
        int free_buf[3];
        for (int k = 0, f = 0; k < 4; ++k) {
            if (k != in) {
                free_buf[f++] = k;
            }
        }
        const int a = free_buf[0];
        const int b = free_buf[1];
        const int c = free_buf[2];
        const auto in_w = layer.in_dim;
        const auto out_w = layer.out_dim;
        const auto x_all = view(in, n_total, in_w);
        const auto x = view(in, n_owned, in_w);
        const bool agg_first = layer.aggregate_first();
        // The first layer's aggregation of the input: from int8 rows when run(QuantizedView)
        // gave them, else the fp32 rows of buffer `in`.
        auto aggregate_input = [&](Aggregation kind, DenseView<float> dst) {
            if (l == 0 && int8_input) {
                aggregate_quantized(kind, dst, t);
            } else {
                aggregate(*operators.at(kind), x_all, dst, t);
            }
        };
        auto timed = [&](auto&& fn) {
            if (!options.step_timing) {
                fn();
                return;
            }
            const auto t0 = std::chrono::steady_clock::now();
            fn();
            backend.synchronize();
            t.dense += seconds_since(t0);
        };
        int out = a;
        switch (layer.type) {
            case LayerType::gcn: {
                // In place (issue 15): x is dead once aggregated or transformed, so the output
                // takes its buffer and the intermediate the first free one: a gcn model runs in
                // two buffers of n_total x max_dim.
                auto& op = *operators.at(Aggregation::gcn);
                const int mid = a;
                out = in;
                if (agg_first) {
                    aggregate_input(Aggregation::gcn, view(mid, n_total, in_w));
                    timed([&] {
                        backend.gemm(view(mid, n_owned, in_w), w.weight.view(),
                                     view(in, n_owned, out_w), 1.0f, 0.0f);
                    });
                } else {
                    timed([&] {
                        backend.gemm(x, w.weight.view(), view(mid, n_owned, out_w), 1.0f, 0.0f);
                    });
                    aggregate(op, view(mid, n_total, out_w), view(in, n_total, out_w), t);
                }
                break;
            }
            case LayerType::sage: {
                auto& op = *operators.at(Aggregation::mean);
                if (agg_first) {
                    aggregate_input(Aggregation::mean, view(b, n_total, in_w));
                    timed([&] {
                        backend.gemm(x, w.root_weight.view(), view(a, n_owned, out_w), 1.0f, 0.0f);
                        backend.gemm(view(b, n_owned, in_w), w.weight.view(),
                                     view(a, n_owned, out_w), 1.0f, 1.0f);
                    });
                } else {
                    timed([&] {
                        backend.gemm(x, w.weight.view(), view(b, n_owned, out_w), 1.0f, 0.0f);
                        backend.gemm(x, w.root_weight.view(), view(a, n_owned, out_w), 1.0f, 0.0f);
                    });
                    aggregate(op, view(b, n_total, out_w), view(c, n_total, out_w), t);
                    timed([&] {
                        backend.axpby(1.0f, view(c, n_owned, out_w), 1.0f, view(a, n_owned, out_w));
                    });
                }
                break;
            }
            case LayerType::gin: {
                auto& op = *operators.at(Aggregation::sum);
                const auto hid = layer.hidden_dim;
                const float self = 1.0f + layer.eps;
                if (agg_first) {
                    aggregate_input(Aggregation::sum, view(b, n_total, in_w));
                    timed([&] {
                        backend.axpby(self, x, 1.0f, view(b, n_owned, in_w));
                        backend.gemm(view(b, n_owned, in_w), w.weight.view(), view(c, n_owned, hid),
                                     1.0f, 0.0f);
                    });
                } else {
                    timed([&] {
                        backend.gemm(x, w.weight.view(), view(b, n_owned, hid), 1.0f, 0.0f);
                    });
                    aggregate(op, view(b, n_total, hid), view(c, n_total, hid), t);
                    timed([&] {
                        backend.axpby(self, view(b, n_owned, hid), 1.0f, view(c, n_owned, hid));
                    });
                }
                timed([&] {
                    backend.bias_activation(view(c, n_owned, hid), w.bias.data(), Activation::relu,
                                            {0, n_owned});
                    backend.gemm(view(c, n_owned, hid), w.weight2.view(), view(a, n_owned, out_w),
                                 1.0f, 0.0f);
                    backend.bias_activation(view(a, n_owned, out_w), w.bias2.data(),
                                            layer.activation, {0, n_owned});
                });
                return out;
            }
            case LayerType::linear:
                timed(
                    [&] { backend.gemm(x, w.weight.view(), view(a, n_owned, out_w), 1.0f, 0.0f); });
                break;
            case LayerType::maxk:
                forward_maxk(layer, w, x, b, c, a, timed, t);
                timed([&] {
                    backend.bias_activation(view(a, n_owned, out_w), nullptr, layer.activation,
                                            {0, n_owned});
                });
                return out;
            case LayerType::agnn:
                forward_agnn(layer, w, in, b, c, a, timed, t);
                timed([&] {
                    backend.bias_activation(view(a, n_owned, out_w), nullptr, layer.activation,
                                            {0, n_owned});
                });
                return out;
            case LayerType::transformer:
                forward_transformer(layer, w, x, a, timed, t);
                break;  // bias (the skip connection's) and activation below
            case LayerType::gat:
                forward_gat(layer, w, x, b, a, timed, t);
                break;  // bias and activation below
        }
        timed([&] {
            backend.bias_activation(view(out, n_owned, out_w), w.bias.data(), layer.activation,
                                    {0, n_owned});
        });
        return out;
    }

    // maxk: z = x W + b (buffer b), top-k into the plan's CBSR, CBSR rows exchanged as records
    // (buffer c), out (buffer a) = A_gcn * S.
    template <typename Timed>
    void forward_maxk(const Layer& layer, Weights& w, DenseView<float> x, int b, int c, int a,
                      Timed& timed, LayerTiming& t)
    {
        const auto out_w = layer.out_dim;
        auto& plan = *w.maxk;
        timed([&] {
            backend.gemm(x, w.weight.view(), view(b, n_owned, out_w), 1.0f, 0.0f);
            backend.bias_activation(view(b, n_owned, out_w), w.bias.data(), Activation::none,
                                    {0, n_owned});
            plan.topk(view(b, n_owned, out_w));
        });
        const auto out = view(a, n_owned, out_w);
        if (!has_peers) {
            const auto t0 = std::chrono::steady_clock::now();
            plan.aggregate(out, {0, n_owned});
            if (options.step_timing) {
                backend.synchronize();
                t.spmm += seconds_since(t0);
            }
            return;
        }
        const auto words = MaxkPlan::record_words(layer.k);
        const auto records = view(c, n_total, words);
        timed([&] { plan.pack({0, n_owned}, records); });
        exchange_and_compute(
            records, out_w, [&](RowRange rows) { plan.aggregate(out, rows); },
            [&] {
                plan.unpack(records, {n_owned, n_total});
            },
            t);
    }

    // agnn: z = x W + b (or x), zn = z / |z| row by row (owned rows before the exchange, halo rows
    // after), out = softmax(beta zn zn^T on A + I) z.
    template <typename Timed>
    void forward_agnn(const Layer& layer, Weights& w, int in, int b, int c, int a, Timed& timed,
                      LayerTiming& t)
    {
        const auto d = layer.out_dim;
        int zb = in;
        if (!layer.weight.empty()) {
            zb = b;
            timed([&] {
                backend.gemm(view(in, n_owned, layer.in_dim), w.weight.view(), view(b, n_owned, d),
                             1.0f, 0.0f);
                backend.bias_activation(view(b, n_owned, d), w.bias.data(), Activation::none,
                                        {0, n_owned});
            });
        }
        const auto z = view(zb, n_total, d);
        const auto zn = view(c, n_total, d);
        timed([&] { backend.normalize_rows(view(zb, n_owned, d), view(c, n_owned, d)); });
        auto& att = *self_loop_attention;
        exchange_and_compute(
            z, d,
            [&](RowRange rows) {
                att.run(view(c, n_owned, d), zn, z, layer.beta, view(a, n_owned, d), rows);
            },
            [&] {
                backend.normalize_rows(
                    DenseView<const float>{z.row(n_owned), n_total - n_owned, d, d},
                    DenseView<float>{zn.row(n_owned), n_total - n_owned, d, d});
            },
            t);
    }

    // transformer: one GEMM x [Wq | Wk | Wv | W_root] + [bq | bk | bv | 0] into the wide buffer
    // (n_total x 4 out_dim, or 3 without a skip connection), whose K | V columns the exchange
    // carries; attention per head straight into the output (buffer a), then the skip columns
    // added; the skip bias and the activation follow in forward().
    template <typename Timed>
    void forward_transformer(const Layer& layer, Weights& w, DenseView<float> x, int a,
                             Timed& timed, LayerTiming& t)
    {
        const auto out_w = layer.out_dim;
        const auto heads = layer.heads;
        const auto d = layer.head_dim();
        const auto width = w.projection.cols();
        const DenseView<float> all{wide.data(), n_total, width, width};
        const auto q = columns(DenseView<float>{all.data, n_owned, width, width}, 0, out_w);
        const auto kv = columns(all, out_w, 2 * out_w);
        const auto k_all = columns(all, out_w, out_w);
        const auto v_all = columns(all, 2 * out_w, out_w);
        const auto out = view(a, n_owned, out_w);
        timed([&] {
            const DenseView<float> owned{all.data, n_owned, width, width};
            backend.gemm(x, w.projection.view(), owned, 1.0f, 0.0f);
            backend.bias_activation(owned, w.projection_bias.data(), Activation::none,
                                    {0, n_owned});
        });
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        auto& att = *adjacency_attention;
        exchange_and_compute(
            kv, 2 * out_w,
            [&](RowRange rows) {
                for (std::int64_t h = 0; h < heads; ++h) {
                    att.run(columns(q, h * d, d), columns(k_all, h * d, d),
                            columns(v_all, h * d, d), scale, columns(out, h * d, d), rows);
                }
            },
            [] {}, t);
        if (width == 4 * out_w) {
            timed([&] {
                const auto root =
                    columns(DenseView<float>{all.data, n_owned, width, width}, 3 * out_w, out_w);
                backend.axpby(1.0f, root, 1.0f, out);
            });
        }
    }

    // gat: z = x W (buffer b, exchanged), el = z a_dst (owned rows), er = z a_src (owned rows
    // before the exchange, halo rows after), out (buffer a) = per-head additive attention.
    template <typename Timed>
    void forward_gat(const Layer& layer, Weights& w, DenseView<float> x, int b, int a, Timed& timed,
                     LayerTiming& t)
    {
        const auto out_w = layer.out_dim;
        const auto heads = layer.heads;
        const auto d = layer.head_dim();
        const auto z = view(b, n_total, out_w);
        const auto z_owned = view(b, n_owned, out_w);
        const auto el = w.el.view();
        const auto er = w.er.view();
        timed([&] {
            backend.gemm(x, w.weight.view(), z_owned, 1.0f, 0.0f);
            backend.gemm(z_owned, w.att_dst.view(), el, 1.0f, 0.0f);
            backend.gemm(z_owned, w.att_src.view(), w.er.rows_view(0, n_owned), 1.0f, 0.0f);
        });
        const auto out = view(a, n_owned, out_w);
        auto& att = *self_loop_attention;
        exchange_and_compute(
            z, out_w,
            [&](RowRange rows) {
                for (std::int64_t h = 0; h < heads; ++h) {
                    att.run_additive(columns(el, h, 1), columns(er, h, 1), layer.negative_slope,
                                     columns(z, h * d, d), columns(out, h * d, d), rows);
                }
            },
            [&] {
                if (n_total > n_owned) {
                    backend.gemm(
                        DenseView<const float>{z.row(n_owned), n_total - n_owned, out_w, out_w},
                        w.att_src.view(), w.er.rows_view(n_owned, n_total), 1.0f, 0.0f);
                }
            },
            t);
    }
};

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

MemoryReport Engine::memory_report() const
{
    return impl_->row_blocks ? impl_->row_blocks->memory_report() : impl_->in_memory_report();
}

std::string Engine::kernel_report() const
{
    std::string out;
    if (impl_->row_blocks) {
        out += impl_->row_blocks->report();
    }
    // Each line names its operator: a model may aggregate with more than one.
    for (const auto& [kind, plan] : impl_->operators) {
        const auto report = plan->report();
        std::size_t pos = 0;
        while (pos < report.size()) {
            auto end = report.find('\n', pos);
            end = end == std::string::npos ? report.size() : end;
            out +=
                std::string(to_string(kind)) + " operator, " + report.substr(pos, end - pos) + "\n";
            pos = end + 1;
        }
    }
    for (std::size_t l = 0; l < impl_->weights.size(); ++l) {
        if (impl_->weights[l].maxk) {
            out += "maxk layer " + std::to_string(l) + ": " + impl_->weights[l].maxk->algorithm() +
                   "\n";
        }
    }
    if (impl_->self_loop_attention) {
        out +=
            "attention over A + I (agnn, gat): " + impl_->self_loop_attention->algorithm() + "\n";
    }
    if (impl_->adjacency_attention) {
        out += "attention over A (transformer): " + impl_->adjacency_attention->algorithm() + "\n";
    }
    if (impl_->options.replay) {
        out += impl_->recorded ? std::string("forward pass recorded once and replayed\n")
                               : "forward pass not recorded: " +
                                     (impl_->replay_note.empty()
                                          ? std::string("needs one part, no step timing, no "
                                                        "kept layers, and a second run")
                                          : impl_->replay_note) +
                                     "\n";
    }
    return out;
}

double Engine::tuning_seconds() const
{
    double total = 0.0;
    for (const auto& [kind, plan] : impl_->operators) {
        total += plan->tuning_seconds();
    }
    return total;
}

std::vector<KernelMetadata> Engine::tuning_metadata() const
{
    std::vector<KernelMetadata> out;
    for (const auto& [kind, plan] : impl_->operators) {
        for (auto& md : plan->tuning_metadata()) {
            // mean and sum share the adjacency pattern: one entry per (kernel, operator).
            const bool seen = std::any_of(out.begin(), out.end(), [&](const KernelMetadata& o) {
                return o.kernel == md.kernel && o.op == md.op;
            });
            if (!seen) {
                out.push_back(std::move(md));
            }
        }
    }
    return out;
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
    HALO_EXPECTS(static_cast<std::int64_t>(features.size()) == im.n_owned * in_w, "features hold ",
                 features.size(), " values, expected ", im.n_owned, " x ", in_w);
    if (im.row_blocks) {
        layer_outputs_.clear();
        replayed_ = false;
        input_seconds_ = 0.0;
        download_seconds_ = 0.0;
        im.row_block_output = im.row_blocks->run(
            features, timings_, im.options.keep_layers ? &layer_outputs_ : nullptr);
        forward_seconds_ = 0.0;
        for (const auto& t : timings_) {
            forward_seconds_ += t.total;
        }
        return im.row_block_output;
    }
    const auto t0 = std::chrono::steady_clock::now();
    im.backend.copy_from_host(features.data(), im.view(0, im.n_owned, in_w));
    input_seconds_ = seconds_since(t0);
    im.int8_input.reset();
    return run_layers();
}

std::span<const float> Engine::forward_random(std::uint64_t seed)
{
    auto& im = *impl_;
    const auto in_w = im.model.input_dim();
    if (im.row_blocks) {
        // Out of core the layer input lives in host memory: generated there.
        return forward(random_node_features(im.shard.global_ids, in_w, seed));
    }
    const auto t0 = std::chrono::steady_clock::now();
    im.backend.fill_random_features(im.shard.global_ids.data(), seed, im.view(0, im.n_owned, in_w));
    im.backend.synchronize();
    input_seconds_ = seconds_since(t0);
    im.int8_input.reset();
    return run_layers();
}

std::span<const float> Engine::forward(const QuantizedView& features)
{
    auto& im = *impl_;
    const auto in_w = im.model.input_dim();
    HALO_EXPECTS(features.rows == im.n_owned && features.cols == in_w && features.ld >= in_w,
                 "int8 features of ", features.rows, " x ", features.cols, ", expected ",
                 im.n_owned, " x ", in_w);
    if (im.row_blocks) {
        HALO_THROW(InputError,
                   "int8 features do not run out of core; dequantize them (halo-infer "
                   "without --int8-features) or raise --device-memory-limit");
    }
    const auto t0 = std::chrono::steady_clock::now();
    im.load_quantized(features);
    input_seconds_ = seconds_since(t0);
    im.int8_input_host = features;
    struct Reset {
        Impl& im;
        ~Reset()
        {
            im.int8_input.reset();
            im.int8_input_host.reset();
        }
    } reset{im};
    return run_layers();
}

std::span<const float> Engine::run_layers()
{
    auto& im = *impl_;
    timings_.assign(im.model.layers.size(), {});
    layer_outputs_.clear();
    replayed_ = false;
    const bool replayable =
        im.options.replay && !im.has_peers && !im.options.step_timing && !im.options.keep_layers;
    const bool int8 = im.int8_input.has_value();
    if (replayable && im.recorded && im.recorded_int8 == int8) {
        const auto t0 = std::chrono::steady_clock::now();
        im.backend.replay();
        im.backend.synchronize();
        forward_seconds_ = seconds_since(t0);
        replayed_ = true;
        return timed_download(im.recorded_out);
    }
    if (replayable && im.runs > 0 && im.replay_note.empty()) {
        // Record (plans allocated what they need in the first run), then replay the recording.
        if (im.backend.begin_capture()) {
            try {
                int cur = 0;
                for (std::size_t l = 0; l < im.model.layers.size(); ++l) {
                    cur = im.forward(l, cur, timings_[l]);
                    im.int8_input.reset();
                }
                im.backend.end_capture();
                im.recorded = true;
                im.recorded_int8 = int8;
                im.recorded_out = cur;
            } catch (const Error& e) {
                try {
                    im.backend.end_capture();
                } catch (const Error&) {  // the recording is dropped either way
                }
                im.replay_note = e.message();
            }
            if (im.recorded) {
                const auto t0 = std::chrono::steady_clock::now();
                im.backend.replay();
                im.backend.synchronize();
                forward_seconds_ = seconds_since(t0);
                replayed_ = true;
                return timed_download(im.recorded_out);
            }
            if (int8) {
                im.load_quantized(*im.int8_input_host);  // the failed recording consumed it
            }
        } else {
            im.replay_note = "the " + im.backend.name() + " backend cannot record";
        }
    }
    ++im.runs;
    int cur = 0;
    for (std::size_t l = 0; l < im.model.layers.size(); ++l) {
        auto& t = timings_[l];
        if (im.options.before_layer) {
            im.options.before_layer(l);
        }
        const auto stats_before = im.exchanger.stats();
        const auto t0 = std::chrono::steady_clock::now();
        cur = im.forward(l, cur, t);
        im.int8_input.reset();  // only the first layer reads the int8 rows
        im.backend.synchronize();
        t.total = seconds_since(t0);
        t.compute = t.spmm + t.dense;
        t.exchanged_bytes = (im.exchanger.stats().bytes_sent - stats_before.bytes_sent) +
                            (im.exchanger.stats().bytes_received - stats_before.bytes_received);
        if (im.options.keep_layers) {
            const auto w = im.model.layers[l].out_dim;
            std::vector<float> host(static_cast<std::size_t>(im.n_owned * w));
            im.backend.copy_to_host(im.view(cur, im.n_owned, w), host.data());
            layer_outputs_.push_back(std::move(host));
        }
    }
    forward_seconds_ = 0.0;
    for (const auto& t : timings_) {
        forward_seconds_ += t.total;
    }
    return timed_download(cur);
}

std::span<const float> Engine::timed_download(int buffer)
{
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = impl_->download(buffer);
    download_seconds_ = seconds_since(t0);
    return out;
}

}  // namespace halo
