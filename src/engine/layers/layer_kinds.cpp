// Every layer type once: its operator, its attention pattern, its step. A new layer type is a
// LayerType (halo/model.hpp, with its checks in src/core/model.cpp), a step file beside this one
// and a row here.
#include <array>

#include "halo/error.hpp"
#include "layer_step.hpp"

namespace halo::detail {
namespace {

const std::array<LayerKind, 8> kinds{{
    {LayerType::gcn, Aggregation::gcn, AttentionPattern::none, true, make_gcn_step},
    {LayerType::sage, Aggregation::mean, AttentionPattern::none, false, make_sage_step},
    {LayerType::gin, Aggregation::sum, AttentionPattern::none, false, make_gin_step},
    {LayerType::linear, std::nullopt, AttentionPattern::none, false, make_linear_step},
    {LayerType::maxk, Aggregation::gcn, AttentionPattern::none, false, make_maxk_step},
    {LayerType::agnn, std::nullopt, AttentionPattern::self_loops, false, make_agnn_step},
    {LayerType::transformer, std::nullopt, AttentionPattern::adjacency, false,
     make_transformer_step},
    {LayerType::gat, std::nullopt, AttentionPattern::self_loops, false, make_gat_step},
}};

}  // namespace

const LayerKind& layer_kind(LayerType type)
{
    for (const auto& kind : kinds) {
        if (kind.type == type) {
            return kind;
        }
    }
    HALO_THROW(LogicError, "layer type ", static_cast<int>(type), " has no step");
}

}  // namespace halo::detail
