#include "halo/kernels_host/autotune_metadata.hpp"

#include <cmath>
#include <limits>
#include <optional>

#include "halo/core/error.hpp"
#include "metadata_checks.hpp"

namespace halo {
namespace {

std::string join(const std::vector<std::string>& names)
{
    std::string out;
    for (const auto& n : names) {
        out += (out.empty() ? "" : ",") + n;
    }
    return out;
}

// The codes of the optional x_type array (docs/FORMAT.md): fixed, whatever FeatureType's order.
std::int32_t x_type_code(FeatureType type)
{
    switch (type) {
        case FeatureType::fp32:
            return 0;
        case FeatureType::fp16:
            return 1;
        case FeatureType::bf16:
            return 2;
    }
    return -1;
}

std::optional<FeatureType> x_type_from_code(std::int32_t code)
{
    switch (code) {
        case 0:
            return FeatureType::fp32;
        case 1:
            return FeatureType::fp16;
        case 2:
            return FeatureType::bf16;
        default:
            return std::nullopt;
    }
}

}  // namespace

KernelMetadata autotune_to_metadata(const AutotuneTable& table, KernelMetadata identity,
                                    const std::string& device)
{
    HALO_EXPECTS(identity.kernel == autotune_metadata_kernel, "autotune metadata named '",
                 identity.kernel, "'");
    auto md = std::move(identity);
    md.strings["device"] = device;
    std::vector<std::string> names;
    auto& begin = md.int64_arrays["begin"];
    auto& end = md.int64_arrays["end"];
    auto& width = md.int64_arrays["width"];
    auto& choice = md.int32_arrays["choice"];
    auto& median = md.float_arrays["median_ms"];
    std::vector<std::int32_t> x_types;
    bool lowp = false;
    for (const auto& [key, c] : table.entries()) {
        if (names.empty()) {
            names = c.names;
        }
        HALO_EXPECTS(c.names == names, "autotune metadata: candidate lists differ between "
                                       "entries (",
                     join(names), " vs ", join(c.names), ")");
        begin.push_back(key.begin);
        end.push_back(key.end);
        width.push_back(key.width);
        choice.push_back(static_cast<std::int32_t>(c.index));
        x_types.push_back(x_type_code(key.x_type));
        lowp = lowp || key.x_type != FeatureType::fp32;
        for (std::size_t i = 0; i < names.size(); ++i) {
            median.push_back(c.failures[i].empty() ? static_cast<float>(c.median_ms[i])
                                                   : std::numeric_limits<float>::quiet_NaN());
        }
    }
    md.strings["candidates"] = join(names);
    if (lowp) {  // absent where every entry is fp32, as in datasets written before 16-bit X
        md.int32_arrays["x_type"] = std::move(x_types);
    }
    return md;
}

StoredAutotune autotune_from_metadata(const KernelMetadata& md, const CsrView& a,
                                      const std::string& device,
                                      const std::vector<std::string>& candidates)
{
    detail::expect_metadata(md, autotune_metadata_kernel, a);
    StoredAutotune out;
    const auto& stored_device = md.string_value("device");
    const auto& stored_names = md.string_value("candidates");
    const auto& begin = md.int64_array("begin");
    const auto& end = md.int64_array("end");
    const auto& width = md.int64_array("width");
    const auto& choice = md.int32_array("choice");
    const auto& median = md.float_array("median_ms");
    const auto n = begin.size();
    const auto stored_types = md.int32_arrays.find("x_type");
    std::vector<FeatureType> x_types(n, FeatureType::fp32);
    if (stored_types != md.int32_arrays.end()) {
        if (stored_types->second.size() != n) {
            HALO_THROW(InputError, md.origin, ": x_type has ", stored_types->second.size(),
                       " values for ", n, " entries");
        }
        for (std::size_t e = 0; e < n; ++e) {
            const auto type = x_type_from_code(stored_types->second[e]);
            if (!type) {
                HALO_THROW(InputError, md.origin, ": entry ", e, ": x_type ",
                           stored_types->second[e], " is not 0 (fp32), 1 (fp16) or 2 (bf16)");
            }
            x_types[e] = *type;
        }
    }
    std::vector<std::string> names;
    for (std::size_t pos = 0; pos <= stored_names.size();) {
        const auto comma = std::min(stored_names.find(',', pos), stored_names.size());
        if (comma > pos) {
            names.push_back(stored_names.substr(pos, comma - pos));
        }
        pos = comma + 1;
    }
    const auto k = names.size();
    if (end.size() != n || width.size() != n || choice.size() != n || median.size() != n * k) {
        HALO_THROW(InputError, md.origin, ": ", n, " entries need end, width and choice of ", n,
                   " and median_ms of ", n * k, " values (", k, " candidates); found ", end.size(),
                   ", ", width.size(), ", ", choice.size(), " and ", median.size());
    }
    for (std::size_t e = 0; e < n; ++e) {
        if (begin[e] < 0 || begin[e] >= end[e] || end[e] > a.num_rows || width[e] < 1) {
            HALO_THROW(InputError, md.origin, ": entry ", e, ": rows [", begin[e], ", ", end[e],
                       ") d=", width[e], " is not a non-empty range of the ", a.num_rows,
                       "-row operator with a positive width");
        }
        if (choice[e] < 0 || static_cast<std::size_t>(choice[e]) >= k ||
            !std::isfinite(median[e * k + static_cast<std::size_t>(choice[e])])) {
            HALO_THROW(InputError, md.origin, ": entry ", e, ": choice ", choice[e],
                       " is not a candidate that ran (", k, " candidates: ", stored_names, ")");
        }
    }
    if (stored_device != device) {
        out.note = "stored autotune choices were measured on " + stored_device + ", this is " +
                   device + ": timing again";
        return out;
    }
    if (names != candidates) {
        out.note = "stored autotune choices are over " + stored_names + ", this plan has " +
                   join(candidates) + ": timing again";
        return out;
    }
    for (std::size_t e = 0; e < n; ++e) {
        AutotuneChoice c;
        c.names = names;
        c.index = static_cast<std::size_t>(choice[e]);
        for (std::size_t i = 0; i < k; ++i) {
            const double ms = median[e * k + i];
            c.median_ms.push_back(ms);
            c.failures.push_back(std::isfinite(ms) ? "" : "failed when tuned");
        }
        out.entries.push_back({{begin[e], end[e], width[e], x_types[e]}, std::move(c)});
    }
    return out;
}

}  // namespace halo
