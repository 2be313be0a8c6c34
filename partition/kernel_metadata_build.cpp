#include "halo/partition/kernel_metadata_build.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "halo/core/error.hpp"
#include "halo/core/operators.hpp"
#include "halo/kernels_host/accel_gcn_metadata.hpp"
#include "halo/kernels_host/fused3s_metadata.hpp"
#include "halo/kernels_host/maxk_metadata.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo {

const std::vector<std::string>& offline_metadata_kernels()
{
    // The SpMM kernels' offline metadata (the registry's), then the other families'.
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto& k : spmm_kernels()) {
            if (k.metadata == SpmmMetadataKind::offline) {
                out.push_back(k.metadata_group);
            }
        }
        out.push_back(maxk_metadata_kernel);
        out.push_back(fused3s_metadata_kernel);
        return out;
    }();
    return names;
}

std::vector<KernelMetadata> build_kernel_metadata(const Shard& shard,
                                                  const std::string& normalization,
                                                  const std::vector<std::string>& kernels)
{
    const auto& known = offline_metadata_kernels();
    for (const auto& k : kernels) {
        if (std::find(known.begin(), known.end(), k) == known.end()) {
            std::string list;
            for (const auto& n : known) {
                list += (list.empty() ? "" : ", ") + n;
            }
            HALO_THROW(InputError, "kernel metadata '", k,
                       "': unknown (offline metadata exists for ", list, ")");
        }
    }
    // The operators' patterns, as the engine builds them (make_aggregation; the values do not
    // matter here, so the gcn degrees are ones).
    std::vector<std::pair<std::string, Csr>> operators;
    operators.emplace_back(std::string(kernel_operator_adjacency), shard.csr);
    if (normalization != "mean") {
        const std::vector<float> ones(static_cast<std::size_t>(shard.num_owned + shard.num_halo),
                                      1.0f);
        operators.emplace_back(std::string(kernel_operator_gcn),
                               make_aggregation(shard, Aggregation::gcn, normalization, ones));
    }
    const std::array<RowRange, 2> ranges{RowRange{0, shard.num_interior},
                                         RowRange{shard.num_interior, shard.num_owned}};
    std::vector<KernelMetadata> out;
    for (const auto& kernel : kernels) {
        for (const auto& [op, a] : operators) {
            if (kernel == accel_gcn_metadata_kernel) {
                const auto view = a.view();
                const auto segments = accel_gcn_segments(a.num_rows, ranges);
                const auto p = build_accel_gcn_partition(view, segments, {});
                out.push_back(accel_gcn_to_metadata(p, view, op));
            } else if (kernel == maxk_metadata_kernel) {
                // The maxk layers aggregate with the gcn operator only (ENGINE.md).
                if (op == kernel_operator_gcn) {
                    const auto view = a.view();
                    out.push_back(edge_groups_to_metadata(build_edge_groups(view), view, op));
                }
            } else if (kernel == fused3s_metadata_kernel) {
                // agnn and gat attend over the gcn pattern, the transformer over the adjacency.
                out.push_back(bsb_to_metadata(build_bsb(a), a, op));
            }
        }
    }
    return out;
}

}  // namespace halo
