#include "halo/core/kernel_metadata.hpp"

#include "halo/core/error.hpp"

namespace halo {
namespace {

constexpr std::uint64_t fnv_offset = 0xcbf29ce484222325ULL;
constexpr std::uint64_t fnv_prime = 0x100000001b3ULL;

// FNV-1a's step over whole 64-bit words (not bytes: 8x fewer multiplications on 10^8 indices).
void mix(std::uint64_t& h, std::uint64_t value)
{
    h ^= value;
    h *= fnv_prime;
}

template <typename Map>
const auto& lookup(const Map& map, const std::string& name, const std::string& origin,
                   const char* kind)
{
    const auto it = map.find(name);
    if (it == map.end()) {
        HALO_THROW(InputError, origin.empty() ? std::string("kernel metadata") : origin,
                   ": missing ", kind, " '", name, "'");
    }
    return it->second;
}

}  // namespace

std::int64_t KernelMetadata::int_value(const std::string& name) const
{
    return lookup(ints, name, origin, "integer attribute");
}

const std::string& KernelMetadata::string_value(const std::string& name) const
{
    return lookup(strings, name, origin, "string attribute");
}

const std::vector<std::int32_t>& KernelMetadata::int32_array(const std::string& name) const
{
    return lookup(int32_arrays, name, origin, "int32 dataset");
}

const std::vector<std::int64_t>& KernelMetadata::int64_array(const std::string& name) const
{
    return lookup(int64_arrays, name, origin, "int64 dataset");
}

const std::vector<float>& KernelMetadata::float_array(const std::string& name) const
{
    return lookup(float_arrays, name, origin, "float32 dataset");
}

void KernelMetadata::expect_operator(const CsrView& a) const
{
    const auto given = pattern_fingerprint(a);
    if (a.num_rows != rows || a.num_cols != cols || a.nnz() != nnz || given != fingerprint) {
        HALO_THROW(InputError, origin.empty() ? "kernel metadata " + kernel : origin,
                   ": built for an operator of ", rows, " x ", cols, " with ", nnz,
                   " nonzeros (pattern fingerprint ", fingerprint, "), given one of ", a.num_rows,
                   " x ", a.num_cols, " with ", a.nnz(), " nonzeros (fingerprint ", given,
                   "); rebuild the metadata (halo-partition --kernel-metadata)");
    }
}

std::uint64_t pattern_fingerprint(const CsrView& a)
{
    std::uint64_t h = fnv_offset;
    mix(h, static_cast<std::uint64_t>(a.num_rows));
    mix(h, static_cast<std::uint64_t>(a.num_cols));
    for (std::int64_t i = 0; i <= a.num_rows; ++i) {
        mix(h, static_cast<std::uint64_t>(a.indptr[i]));
    }
    for (std::int64_t k = 0; k < a.nnz(); ++k) {
        mix(h, static_cast<std::uint64_t>(static_cast<std::uint32_t>(a.indices[k])));
    }
    return h;
}

KernelMetadata metadata_for_operator(const std::string& kernel, const std::string& op,
                                     const CsrView& a)
{
    KernelMetadata md;
    md.kernel = kernel;
    md.op = op;
    md.fingerprint = pattern_fingerprint(a);
    md.rows = a.num_rows;
    md.cols = a.num_cols;
    md.nnz = a.nnz();
    return md;
}

void validate_metadata_name(std::string_view name, std::string_view what)
{
    bool ok = !name.empty() && name.size() <= 64;
    for (const char c : name) {
        ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    }
    if (!ok) {
        HALO_THROW(InputError, what, " name '", name,
                   "': expected 1 to 64 characters of [a-z0-9_]");
    }
}

}  // namespace halo
