// Every layer type's step, from halo/core/layer_types.def: a type `name` defines its LayerKind
// `name##_kind` beside its step in src/engine/layers/.
#include <array>

#include "halo/core/error.hpp"
#include "layer_step.hpp"

namespace halo::detail {

namespace {

const std::array kinds{
#define HALO_LAYER_TYPE(name) &name##_kind,
#include "halo/core/layer_types.def"
#undef HALO_LAYER_TYPE
};

}  // namespace

const LayerKind& layer_kind(LayerType type)
{
    for (const auto* kind : kinds) {
        if (kind->type == type) {
            return *kind;
        }
    }
    HALO_THROW(LogicError, "layer type ", static_cast<int>(type), " has no step");
}

std::string out_of_core_types()
{
    std::string out;
    for (const auto* kind : kinds) {
        if (kind->make_blocks != nullptr) {
            out += (out.empty() ? "" : ", ") + to_string(kind->type);
        }
    }
    return out;
}

}  // namespace halo::detail
