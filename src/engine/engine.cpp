#include "halo/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "halo/error.hpp"
#include "random.hpp"

namespace halo {
namespace {

const char* to_string(Aggregation kind)
{
    switch (kind) {
        case Aggregation::gcn:
            return "gcn";
        case Aggregation::mean:
            return "mean";
        case Aggregation::sum:
            return "sum";
    }
    return "?";
}

Aggregation aggregation_of(LayerType type)
{
    switch (type) {
        case LayerType::gcn:
            return Aggregation::gcn;
        case LayerType::sage:
            return Aggregation::mean;
        case LayerType::gin:
            return Aggregation::sum;
    }
    HALO_THROW(LogicError, "unknown layer type");
}

global_id column_global_id(const Shard& shard, local_id col)
{
    return col < shard.num_owned ? shard.global_ids[col]
                                 : shard.halo_global_ids[col - shard.num_owned];
}

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* kernel_operator_name(Aggregation kind)
{
    return kind == Aggregation::gcn ? kernel_operator_gcn.data() : kernel_operator_adjacency.data();
}

std::vector<float> gcn_degrees(const Shard& shard)
{
    const auto& a = shard.csr;
    std::vector<float> degree(shard.num_owned);
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < shard.num_owned; ++i) {
        double sum = 0.0;
        bool diagonal = false;
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            sum += a.has_values() ? a.values[k] : 1.0;
            diagonal = diagonal || a.indices[k] == i;
        }
        degree[i] = static_cast<float>(diagonal ? sum : sum + 1.0);
    }
    return degree;
}

Csr make_aggregation(const Shard& shard, Aggregation kind, const std::string& dataset_normalization,
                     const std::vector<float>& degree)
{
    if (dataset_normalization == to_string(kind)) {
        return shard.csr;  // the dataset holds exactly this operator
    }
    if (dataset_normalization != "none") {
        HALO_THROW(InputError, "the dataset's adjacency is ", dataset_normalization,
                   "-normalized, but a layer needs the ", to_string(kind),
                   " operator; partition with --normalize none (the engine derives every "
                   "operator from the raw adjacency) or --normalize ",
                   to_string(kind));
    }
    const auto& a = shard.csr;
    const auto n = shard.num_owned;
    Csr out;
    out.num_rows = a.num_rows;
    out.num_cols = a.num_cols;
    if (kind == Aggregation::sum) {
        return a;
    }
    if (kind == Aggregation::mean) {
        out = a;
        out.values.resize(a.indices.size());
#pragma omp parallel for schedule(dynamic, 1024)
        for (std::int64_t i = 0; i < n; ++i) {
            double sum = 0.0;
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                sum += a.has_values() ? a.values[k] : 1.0;
            }
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                const double v = a.has_values() ? a.values[k] : 1.0;
                out.values[k] = static_cast<float>(sum > 0.0 ? v / sum : 0.0);
            }
        }
        return out;
    }
    // gcn: add the missing diagonal entries where global column order puts them, then scale.
    HALO_EXPECTS(static_cast<std::int64_t>(degree.size()) == shard.num_owned + shard.num_halo,
                 "gcn needs ", shard.num_owned + shard.num_halo, " degrees, got ", degree.size());
    std::vector<char> has_diagonal(n, 0);
    out.indptr.assign(n + 1, 0);
    for (std::int64_t i = 0; i < n; ++i) {
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            has_diagonal[i] = has_diagonal[i] || a.indices[k] == i;
        }
        out.indptr[i + 1] = out.indptr[i] + a.row_nnz(i) + (has_diagonal[i] ? 0 : 1);
    }
    out.indices.resize(out.indptr[n]);
    out.values.resize(out.indptr[n]);
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = 0; i < n; ++i) {
        const auto self = shard.global_ids[i];
        auto o = out.indptr[i];
        bool placed = has_diagonal[i] != 0;
        auto emit = [&](local_id col, double value) {
            out.indices[o] = col;
            out.values[o] =
                static_cast<float>(value / std::sqrt(static_cast<double>(degree[i]) * degree[col]));
            ++o;
        };
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            if (!placed && column_global_id(shard, a.indices[k]) > self) {
                emit(static_cast<local_id>(i), 1.0);
                placed = true;
            }
            emit(a.indices[k], a.has_values() ? a.values[k] : 1.0);
        }
        if (!placed) {
            emit(static_cast<local_id>(i), 1.0);
        }
    }
    return out;
}

namespace {

class LocalExchanger final : public HaloExchanger {
public:
    void start(DenseView<float>) override { ++stats_.exchanges; }
    void finish() override {}
    const ExchangeStats& stats() const override { return stats_; }

private:
    ExchangeStats stats_;
};

}  // namespace

std::unique_ptr<HaloExchanger> make_local_exchanger(const Shard& shard)
{
    if (shard.num_halo != 0 || !shard.plan.send_ranks.empty() || !shard.plan.recv_ranks.empty()) {
        HALO_THROW(InputError, "part ", shard.part, " of ", shard.num_parts, " has ",
                   shard.num_halo, " halo rows and ", shard.plan.send_ranks.size(),
                   " peers: a local run needs a single-part dataset");
    }
    return std::make_unique<LocalExchanger>();
}

std::vector<float> random_node_features(const std::vector<global_id>& global_ids, std::int64_t dim,
                                        std::uint64_t seed)
{
    // Stream 2^40 keeps feature draws apart from the model's weight streams.
    constexpr std::uint64_t feature_stream = std::uint64_t{1} << 40;
    std::vector<float> x(global_ids.size() * static_cast<std::size_t>(dim));
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(global_ids.size()); ++r) {
        const auto base =
            static_cast<std::uint64_t>(global_ids[r]) * static_cast<std::uint64_t>(dim);
        for (std::int64_t j = 0; j < dim; ++j) {
            x[r * dim + j] = detail::uniform_pm1(seed, feature_stream, base + j);
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
    std::map<Aggregation, std::unique_ptr<SpmmPlan>> operators;

    struct Weights {
        Matrix weight, bias, root_weight, weight2, bias2;
    };
    std::vector<Weights> weights;
    std::vector<Matrix> buffers;  // 4 work matrices of n_total x max_dim

    Impl(Backend& b, HaloExchanger& e, const Shard& s, const Model& m, EngineOptions o)
        : backend(b),
          exchanger(e),
          shard(s),
          model(m),
          options(std::move(o)),
          n_owned(s.num_owned),
          n_total(s.num_owned + s.num_halo)
    {
        validate_model(model, "model");
        prepare_operators();
        for (const auto& layer : model.layers) {
            Weights w;
            const auto in_w = layer.in_dim;
            const auto mid = layer.type == LayerType::gin ? layer.hidden_dim : layer.out_dim;
            w.weight = upload(layer.weight, in_w, mid);
            w.bias = upload(layer.bias, 1, layer.bias.empty() ? 0 : mid);
            w.root_weight =
                upload(layer.root_weight, layer.root_weight.empty() ? 0 : in_w, layer.out_dim);
            w.weight2 = upload(layer.weight2, layer.weight2.empty() ? 0 : mid, layer.out_dim);
            w.bias2 = upload(layer.bias2, 1, layer.bias2.empty() ? 0 : layer.out_dim);
            weights.push_back(std::move(w));
        }
        for (int k = 0; k < 4; ++k) {
            buffers.push_back(
                backend.allocate(n_total, std::max<std::int64_t>(model.max_dim(), 1)));
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

    void prepare_operators()
    {
        std::vector<float> degree;
        for (const auto& layer : model.layers) {
            const auto kind = aggregation_of(layer.type);
            if (operators.count(kind) != 0) {
                continue;
            }
            if (kind == Aggregation::gcn && options.dataset_normalization != "gcn" &&
                degree.empty()) {
                degree = exchange_degrees();
            }
            const auto op = make_aggregation(shard, kind, options.dataset_normalization, degree);
            SpmmPlanHints hints;
            hints.op = kernel_operator_name(kind);
            hints.ranges = {{0, shard.num_interior}, {shard.num_interior, shard.num_owned}};
            for (const auto& md : options.kernel_metadata) {
                if (md.op == hints.op) {
                    hints.stored.push_back(md);
                }
            }
            operators[kind] = backend.make_spmm_plan(op, hints);
        }
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

    // Contiguous rows x cols view over buffer k (which holds n_total * max_dim floats).
    DenseView<float> view(int k, std::int64_t rows, std::int64_t cols) const
    {
        return {buffers[k].data(), rows, cols, cols};
    }

    // dst (owned rows) = op * src, exchanging src's halo rows, overlapping interior rows.
    void aggregate(SpmmPlan& op, DenseView<float> src, DenseView<float> dst, LayerTiming& t)
    {
        const RowRange interior = shard.interior_rows();
        const RowRange boundary = shard.boundary_rows();
        backend.synchronize();
        auto t0 = std::chrono::steady_clock::now();
        exchanger.start(src);
        t.exchange += seconds_since(t0);
        if (options.overlap) {
            t0 = std::chrono::steady_clock::now();
            op.run(src, dst, interior);
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
        op.run(src, dst, options.overlap ? boundary : RowRange{0, n_owned});
        backend.synchronize();
        t.spmm += seconds_since(t0);
    }

    // Runs one layer from buffer `in` into another buffer; returns the output buffer index.
    int forward(std::size_t l, int in, LayerTiming& t)
    {
        const auto& layer = model.layers[l];
        const auto& w = weights[l];
        auto& op = *operators.at(aggregation_of(layer.type));
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
        auto timed = [&](auto&& fn) {
            const auto t0 = std::chrono::steady_clock::now();
            fn();
            backend.synchronize();
            t.dense += seconds_since(t0);
        };
        int out = a;
        switch (layer.type) {
            case LayerType::gcn:
                if (agg_first) {
                    aggregate(op, x_all, view(b, n_total, in_w), t);
                    timed([&] {
                        backend.gemm(view(b, n_owned, in_w), w.weight.view(),
                                     view(a, n_owned, out_w), 1.0f, 0.0f);
                    });
                } else {
                    timed([&] {
                        backend.gemm(x, w.weight.view(), view(b, n_owned, out_w), 1.0f, 0.0f);
                    });
                    aggregate(op, view(b, n_total, out_w), view(a, n_total, out_w), t);
                }
                break;
            case LayerType::sage:
                if (agg_first) {
                    aggregate(op, x_all, view(b, n_total, in_w), t);
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
            case LayerType::gin: {
                const auto hid = layer.hidden_dim;
                const float self = 1.0f + layer.eps;
                if (agg_first) {
                    aggregate(op, x_all, view(b, n_total, in_w), t);
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
        }
        timed([&] {
            backend.bias_activation(view(out, n_owned, out_w), w.bias.data(), layer.activation,
                                    {0, n_owned});
        });
        return out;
    }
};

Engine::Engine(Backend& backend, HaloExchanger& exchanger, const Shard& shard, const Model& model,
               EngineOptions options)
    : impl_(std::make_unique<Impl>(backend, exchanger, shard, model, std::move(options)))
{
}

Engine::~Engine() = default;

std::string Engine::kernel_report() const
{
    std::string out;
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
    return out;
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
    auto& im = *impl_;
    const auto in_w = im.model.input_dim();
    HALO_EXPECTS(static_cast<std::int64_t>(features.size()) == im.n_owned * in_w, "features hold ",
                 features.size(), " values, expected ", im.n_owned, " x ", in_w);
    timings_.assign(im.model.layers.size(), {});
    layer_outputs_.clear();
    im.backend.copy_from_host(features.data(), im.view(0, im.n_owned, in_w));
    int cur = 0;
    for (std::size_t l = 0; l < im.model.layers.size(); ++l) {
        auto& t = timings_[l];
        if (im.options.before_layer) {
            im.options.before_layer(l);
        }
        const auto stats_before = im.exchanger.stats();
        const auto t0 = std::chrono::steady_clock::now();
        cur = im.forward(l, cur, t);
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
    const auto out_w = im.model.output_dim();
    std::vector<float> out(static_cast<std::size_t>(im.n_owned * out_w));
    im.backend.copy_to_host(im.view(cur, im.n_owned, out_w), out.data());
    return out;
}

}  // namespace halo
