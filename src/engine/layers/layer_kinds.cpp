// Every layer type's step, from halo/layer_types.def: a type `name` defines its LayerKind
// `name##_kind` beside its step in src/engine/layers/.
#include <array>

#include "halo/error.hpp"
#include "layer_step.hpp"

namespace halo::detail {

const LayerKind& layer_kind(LayerType type)
{
    static const std::array kinds{
#define HALO_LAYER_TYPE(name) &name##_kind,
#include "halo/layer_types.def"
#undef HALO_LAYER_TYPE
    };
    for (const auto* kind : kinds) {
        if (kind->type == type) {
            return *kind;
        }
    }
    HALO_THROW(LogicError, "layer type ", static_cast<int>(type), " has no step");
}

}  // namespace halo::detail
