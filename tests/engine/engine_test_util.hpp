// Graphs, models and a dense double-precision forward pass shared by the engine tests.
#pragma once

#include <cmath>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "halo/core/graph.hpp"
#include "halo/core/io.hpp"
#include "halo/core/model.hpp"
#include "halo/core/shard.hpp"
#include "halo/kernels_host/backend.hpp"
#include "halo/partition/partition.hpp"
#include "halo/partition/shard_builder.hpp"
#include "halo_test.hpp"
#include "scaled_operator.hpp"

namespace halo::testing {

/// A symmetric test graph: "rmat:S" (R-MAT scale S, edge factor 8, self-loops kept as drawn) or
/// the name of a shared graph ("cora"); empty CSR when a shared file is absent.
inline Csr engine_test_graph(const std::string& name)
{
    EdgeList edges;
    if (name.rfind("rmat:", 0) == 0) {
        RmatOptions o;
        o.scale = std::stoi(name.substr(5));
        o.edge_factor = 8;
        o.seed = 3;
        edges = generate_rmat(o);
    } else {
        const auto path = shared_data_file(name + ".el.gz");
        if (path.empty()) {
            return {};
        }
        edges = read_edge_list(path);
    }
    BuildOptions b;
    b.symmetrize = true;
    return build_csr(edges, b);
}

/// Part `rank` of `graph` cut into `parts` parts (METIS; block for a single part), with its halo
/// plan: the shard a rank of a distributed engine test runs.
inline Shard test_shard(const Csr& graph, int parts, int rank)
{
    PartitionOptions popt;
    popt.num_parts = parts;
    popt.method = parts == 1 ? Partitioner::block : Partitioner::metis;
    const auto owner = partition_graph(graph.view(), popt);
    return build_shard(graph, owner, parts, rank);
}

/// The dense double-precision forward pass of `model` on the whole graph: the oracle the engine
/// is compared with (model.hpp gives the semantics).
inline std::vector<double> dense_forward(const Csr& a, const Model& model,
                                         const std::vector<float>& features)
{
    const auto n = a.num_rows;
    std::vector<double> x(features.begin(), features.end());
    auto value = [&](std::int64_t k) { return a.has_values() ? double(a.values[k]) : 1.0; };
    // gcn degrees of A with remaining self-loops added
    std::vector<double> gcn_degree(n, 0.0);
    std::vector<bool> has_diag(n, false);
    for (std::int64_t i = 0; i < n; ++i) {
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            gcn_degree[i] += value(k);
            has_diag[i] = has_diag[i] || a.indices[k] == i;
        }
        if (!has_diag[i]) {
            gcn_degree[i] += 1.0;
        }
    }
    auto matmul = [n](const std::vector<double>& in, std::int64_t k, const std::vector<float>& w,
                      std::int64_t m) {
        std::vector<double> out(n * m, 0.0);
        for (std::int64_t i = 0; i < n; ++i) {
            for (std::int64_t p = 0; p < k; ++p) {
                for (std::int64_t j = 0; j < m; ++j) {
                    out[i * m + j] += in[i * k + p] * w[p * m + j];
                }
            }
        }
        return out;
    };
    auto add_bias_act = [n](std::vector<double>& y, std::int64_t m, const std::vector<float>& b,
                            Activation act) {
        for (std::int64_t i = 0; i < n; ++i) {
            for (std::int64_t j = 0; j < m; ++j) {
                double v = y[i * m + j] + (b.empty() ? 0.0 : b[j]);
                y[i * m + j] = act == Activation::relu ? std::max(v, 0.0) : v;
            }
        }
    };
    for (const auto& layer : model.layers) {
        const auto d = layer.in_dim;
        std::vector<double> agg(n * d, 0.0);
        for (std::int64_t i = 0; i < n; ++i) {
            double row_sum = 0.0;
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                row_sum += value(k);
            }
            for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
                const auto j = a.indices[k];
                double c = value(k);
                if (layer.type == LayerType::gcn) {
                    c /= std::sqrt(gcn_degree[i] * gcn_degree[j]);
                } else if (layer.type == LayerType::sage) {
                    c /= row_sum;
                }
                for (std::int64_t t = 0; t < d; ++t) {
                    agg[i * d + t] += c * x[j * d + t];
                }
            }
            if (layer.type == LayerType::gcn && !has_diag[i]) {
                for (std::int64_t t = 0; t < d; ++t) {
                    agg[i * d + t] += x[i * d + t] / gcn_degree[i];
                }
            }
        }
        std::vector<double> y;
        if (layer.type == LayerType::gcn) {
            y = matmul(agg, d, layer.weight, layer.out_dim);
        } else if (layer.type == LayerType::sage) {
            y = matmul(agg, d, layer.weight, layer.out_dim);
            const auto root = matmul(x, d, layer.root_weight, layer.out_dim);
            for (std::size_t k = 0; k < y.size(); ++k) {
                y[k] += root[k];
            }
        } else {
            for (std::size_t k = 0; k < agg.size(); ++k) {
                agg[k] += (1.0 + layer.eps) * x[k];
            }
            auto h = matmul(agg, d, layer.weight, layer.hidden_dim);
            add_bias_act(h, layer.hidden_dim, layer.bias, Activation::relu);
            y = matmul(h, layer.hidden_dim, layer.weight2, layer.out_dim);
            add_bias_act(y, layer.out_dim, layer.bias2, layer.activation);
            x = std::move(y);
            continue;
        }
        add_bias_act(y, layer.out_dim, layer.bias, layer.activation);
        x = std::move(y);
    }
    return x;
}

/// An SpMM plan that hides its run_add (SpmmPlan::adds_in_place false): the engine's split
/// overlap then adds the halo columns through a buffer of its own, as with such a device plan.
class NoAddInPlace final : public halo::SpmmPlan {
public:
    explicit NoAddInPlace(std::unique_ptr<halo::SpmmPlan> plan) : plan_(std::move(plan)) {}
    void run(halo::DenseView<const float> x, halo::DenseView<float> y, halo::RowRange rows) override
    {
        plan_->run(x, y, rows);
    }
    std::string algorithm() const override { return plan_->algorithm() + " (no run_add)"; }
    bool exact() const override { return plan_->exact(); }

private:
    std::unique_ptr<halo::SpmmPlan> plan_;
};

/// The CPU backend, but claiming to stream scaled operators: records the scalings the row-block
/// driver hands to make_streamed_spmm (the CUDA backend's input) and runs the CPU default; with
/// make_scaled, also makes in-memory plans from a pattern and its scalings
/// (Backend::make_scaled_spmm_plan, the CUDA backend's cuSPARSE plans), recording them. With
/// fail_allocations, allocate() throws halo::Error as a full device does. With add_in_place
/// false, its plans do not add in place (NoAddInPlace). With packed, it stores 16-bit matrices
/// (the CPU backend's gemm_features and store_features, their range checks deferred with
/// deferred_checks). With records, it "records" as the CUDA backend does: between begin_capture
/// and end_capture the work runs as usual, replay() runs nothing (the buffers keep the recorded
/// run's results, the same for the same input), and an allocation while recording is counted
/// and throws halo::Error, as cudaMalloc fails in a thread-local capture.
class ScalingRecorder final : public halo::Backend {
public:
    std::string name() const override { return cpu_->name(); }
    halo::Matrix allocate(std::int64_t rows, std::int64_t cols) override
    {
        if (recording) {
            ++allocations_while_recording;
            HALO_THROW(halo::Error, "an allocation of ", rows, " x ", cols,
                       " while recording (test)");
        }
        if (fail_allocations) {
            HALO_THROW(halo::Error, "out of device memory allocating ", rows, " x ", cols,
                       " (test)");
        }
        return cpu_->allocate(rows, cols);
    }
    void copy_from_host(const float* host, halo::DenseView<float> dst) override
    {
        cpu_->copy_from_host(host, dst);
    }
    void copy_to_host(halo::DenseView<const float> src, float* host) override
    {
        cpu_->copy_to_host(src, host);
    }
    bool uses_host_memory() const override { return true; }
    bool streams_scaled_operators() const override { return true; }
    // 16-bit activations as the CPU backend stores them, unless fp32_only (a backend without).
    bool stores_activations(halo::FeatureType type) const override
    {
        return type == halo::FeatureType::fp32 || !fp32_only;
    }
    // With deferred_checks, as the CUDA backend reports them: the first overflow kept and
    // returned by take_activation_overflow(), not by the call.
    std::optional<halo::ActivationOverflow> round_activations(halo::DenseView<float> y,
                                                              halo::FeatureType type,
                                                              std::int32_t store) override
    {
        return defer(cpu_->round_activations(y, type, store));
    }
    std::optional<halo::ActivationOverflow> take_activation_overflow() override
    {
        ++overflow_checks;
        return std::exchange(deferred_overflow, std::nullopt);
    }
    bool stores_16bit() const override { return packed; }
    std::optional<halo::ActivationOverflow> gemm_features(halo::FeatureView a, halo::FeatureView b,
                                                          halo::MutableFeatureView c,
                                                          std::int32_t store,
                                                          float beta) override
    {
        return defer(cpu_->gemm_features(a, b, c, store, beta));
    }
    std::optional<halo::ActivationOverflow> store_features(halo::DenseView<const float> src,
                                                           const float* bias,
                                                           halo::Activation act,
                                                           halo::MutableFeatureView dst,
                                                           std::int32_t store) override
    {
        return defer(cpu_->store_features(src, bias, act, dst, store));
    }
    void widen_features(halo::FeatureView src, halo::DenseView<float> dst) override
    {
        cpu_->widen_features(src, dst);
    }
    bool begin_capture() override
    {
        recording = records;
        return records;
    }
    void end_capture() override
    {
        recording = false;
        ++recordings;
    }
    void replay() override { ++replays; }
    std::unique_ptr<halo::SpmmPlan> make_spmm_plan(const halo::Csr& a) override
    {
        return wrapped(cpu_->make_spmm_plan(a));
    }
    // With make_scaled: records the pattern and scalings and runs a CPU plan over the values
    // they make (what the CUDA backend makes on the device).
    std::unique_ptr<halo::SpmmPlan> make_scaled_spmm_plan(
        const halo::Csr& pattern, const halo::SpmmPlanHints& hints,
        const halo::OperatorScaling& scaling) override
    {
        if (!make_scaled ||
            (scaled_limit >= 0 && scaled.size() >= static_cast<std::size_t>(scaled_limit))) {
            return nullptr;
        }
        scaled.emplace_back(&pattern, scaling);
        operators_.push_back(scaled_operator(pattern, scaling));
        return wrapped(cpu_->make_spmm_plan(operators_.back(), hints));
    }
    std::unique_ptr<halo::StreamedSpmm> make_streamed_spmm(const halo::Csr& a,
                                                           const halo::SpmmPlanHints& hints,
                                                           const halo::OperatorScaling* scaling,
                                                           bool scaled_input) override
    {
        recorded.emplace_back(&a, scaling != nullptr ? std::optional(*scaling) : std::nullopt);
        recorded_scaled_input.push_back(scaled_input);
        return cpu_->make_streamed_spmm(a, hints, scaling, scaled_input);
    }
    void dequantize(const halo::QuantizedView& x, halo::DenseView<float> y) override
    {
        cpu_->dequantize(x, y);
    }
    void gemm(halo::DenseView<const float> a, halo::DenseView<const float> b,
              halo::DenseView<float> c, float alpha, float beta) override
    {
        cpu_->gemm(a, b, c, alpha, beta);
    }
    void axpby(float alpha, halo::DenseView<const float> x, float beta,
               halo::DenseView<float> y) override
    {
        cpu_->axpby(alpha, x, beta, y);
    }
    void bias_activation(halo::DenseView<float> y, const float* bias, halo::Activation act,
                         halo::RowRange rows) override
    {
        cpu_->bias_activation(y, bias, act, rows);
    }
    void normalize_rows(halo::DenseView<const float> x, halo::DenseView<float> y) override
    {
        cpu_->normalize_rows(x, y);
    }
    void synchronize() override { cpu_->synchronize(); }
    // Counted; the fail_upload_at-th call (from 1) throws halo::Error as a failed copy does.
    void upload_async(const float* host, halo::DenseView<float> dst) override
    {
        ++uploads;
        if (uploads == fail_upload_at) {
            HALO_THROW(halo::Error, "upload ", uploads, " failed (test)");
        }
        cpu_->copy_from_host(host, dst);
    }
    void wait_upload() override { ++waits; }
    halo::Matrix allocate_host(std::int64_t rows, std::int64_t cols) override
    {
        host_allocated += rows * cols;
        return cpu_->allocate_host(rows, cols);
    }

    std::vector<std::pair<const halo::Csr*, std::optional<halo::OperatorScaling>>> recorded;
    std::vector<bool> recorded_scaled_input;  // the scaled_input asked with each
    bool make_scaled = false;
    /// With make_scaled: at most this many scaled plans, null after (-1: no limit).
    int scaled_limit = -1;
    bool add_in_place = true;
    bool fail_allocations = false;
    bool fp32_only = false;  // stores_activations: fp32 only
    bool packed = false;     // stores_16bit
    bool records = false;    // begin_capture records
    bool recording = false;  // between begin_capture and end_capture
    int allocations_while_recording = 0;
    int recordings = 0;  // end_capture calls
    int replays = 0;
    bool deferred_checks = false;  // round_activations: overflows kept for the next take
    std::optional<halo::ActivationOverflow> deferred_overflow;
    int deferred_stores = 0;  // round_activations calls with deferred_checks
    int overflow_checks = 0;  // take_activation_overflow calls
    int uploads = 0;         // upload_async calls
    int waits = 0;           // wait_upload calls
    int fail_upload_at = 0;  // 0: none fails
    std::int64_t host_allocated = 0;  // floats asked of allocate_host
    std::vector<std::pair<const halo::Csr*, halo::OperatorScaling>> scaled;

private:
    // A 16-bit store's overflow, returned or (deferred_checks) kept as round_activations keeps it.
    std::optional<halo::ActivationOverflow> defer(std::optional<halo::ActivationOverflow> overflow)
    {
        if (!deferred_checks) {
            return overflow;
        }
        if (overflow && !deferred_overflow) {
            deferred_overflow = overflow;
        }
        ++deferred_stores;
        return std::nullopt;
    }

    std::unique_ptr<halo::SpmmPlan> wrapped(std::unique_ptr<halo::SpmmPlan> plan) const
    {
        if (add_in_place) {
            return plan;
        }
        return std::make_unique<NoAddInPlace>(std::move(plan));
    }

    std::unique_ptr<halo::Backend> cpu_ = halo::make_cpu_backend();
    std::deque<halo::Csr> operators_;
};

}  // namespace halo::testing
