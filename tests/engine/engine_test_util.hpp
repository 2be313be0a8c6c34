// Graphs, models and a dense double-precision forward pass shared by the engine tests.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "halo/csr.hpp"
#include "halo/generators.hpp"
#include "halo/graph.hpp"
#include "halo/io.hpp"
#include "halo/model.hpp"
#include "halo_test.hpp"

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

}  // namespace halo::testing
