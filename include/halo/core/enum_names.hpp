// Names of enum values for the options that name them (layer types, partitioners, normalizations,
// ...): one table per enum, read both ways, instead of a switch and an if-chain that must agree.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "halo/core/error.hpp"

namespace halo {

template <typename E>
struct EnumName {
    E value;
    std::string_view name;
};

/// The name of `value` in `names`; "?" for a value the table lacks.
template <typename E, std::size_t N>
std::string_view enum_name(const std::array<EnumName<E>, N>& names, E value)
{
    for (const auto& n : names) {
        if (n.value == value) {
            return n.name;
        }
    }
    return "?";
}

/// The value named `text`. Throws halo::InputError "unknown <what> '<text>' (expected a, b or c)",
/// listing the names in table order.
template <typename E, std::size_t N>
E parse_enum(const std::array<EnumName<E>, N>& names, std::string_view text, const char* what)
{
    std::string expected;
    for (std::size_t i = 0; i < N; ++i) {
        if (names[i].name == text) {
            return names[i].value;
        }
        expected += i == 0 ? "" : i + 1 == N ? " or " : ", ";
        expected += names[i].name;
    }
    HALO_THROW(InputError, "unknown ", what, " '", text, "' (expected ", expected, ")");
}

}  // namespace halo
