// The activation names of include/halo/core/dense.hpp (model files and options spell them).
#include "halo/core/dense.hpp"

#include <array>

#include "halo/core/enum_names.hpp"

namespace halo {
namespace {

constexpr std::array<EnumName<Activation>, 2> activation_names{
    {{Activation::none, "none"}, {Activation::relu, "relu"}}};

}  // namespace

Activation parse_activation(std::string_view text)
{
    return parse_enum(activation_names, text, "activation");
}

std::string to_string(Activation activation)
{
    return std::string(enum_name(activation_names, activation));
}

}  // namespace halo
