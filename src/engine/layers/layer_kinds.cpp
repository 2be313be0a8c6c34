// Every layer type once. A new layer type is a LayerType (halo/model.hpp, with its checks in
// src/core/model.cpp), a step file beside this one defining its LayerKind, and an entry here.
#include <array>

#include "halo/error.hpp"
#include "layer_step.hpp"

namespace halo::detail {

const LayerKind& layer_kind(LayerType type)
{
    static const std::array<const LayerKind*, 8> kinds{&gcn_kind,         &sage_kind, &gin_kind,
                                                       &linear_kind,      &maxk_kind, &agnn_kind,
                                                       &transformer_kind, &gat_kind};
    for (const auto* kind : kinds) {
        if (kind->type == type) {
            return *kind;
        }
    }
    HALO_THROW(LogicError, "layer type ", static_cast<int>(type), " has no step");
}

}  // namespace halo::detail
