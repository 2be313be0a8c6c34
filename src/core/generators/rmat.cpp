// R-MAT / Kronecker edges, the seeded relabeling, and the command-line graph specs.
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "halo/core/detail/resident_memory.hpp"
#include "halo/core/error.hpp"
#include "halo/core/generators.hpp"
#include "random.hpp"

namespace halo {
namespace {

// Domains separate the draws made from one user seed (random.hpp).
constexpr std::uint64_t kRmatEdgeDomain = 0x524d41542d656467ULL;      // "RMAT-edg"
constexpr std::uint64_t kRmatScrambleDomain = 0x524d41542d736372ULL;  // "RMAT-scr"

constexpr int kMaxScale = 40;

std::uint64_t reverse_bits(std::uint64_t v) noexcept
{
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0fULL) | ((v & 0x0f0f0f0f0f0f0f0fULL) << 4);
    v = ((v >> 8) & 0x00ff00ff00ff00ffULL) | ((v & 0x00ff00ff00ff00ffULL) << 8);
    v = ((v >> 16) & 0x0000ffff0000ffffULL) | ((v & 0x0000ffff0000ffffULL) << 16);
    return (v >> 32) | (v << 32);
}

// A seeded bijection of [0, 2^scale), in the manner of the Graph500 reference generator: rounds of
// an affine map modulo 2^scale (odd multiplier, so invertible) followed by a reversal of the scale
// bits. The multiply only carries low bits upwards; the reversal turns them into the low bits of
// the next round, so after two rounds every output bit depends on every input bit.
class Scrambler {
public:
    Scrambler(int scale, std::uint64_t seed) : scale_(scale)
    {
        mask_ = (std::uint64_t{1} << scale) - 1;
        const detail::RngKey key(seed, kRmatScrambleDomain);
        for (int r = 0; r < kRounds; ++r) {
            mul_[r] = key.bits(2 * r) | 1;
            add_[r] = key.bits(2 * r + 1);
        }
    }

    std::uint64_t operator()(std::uint64_t v) const noexcept
    {
        for (int r = 0; r < kRounds; ++r) {
            v = (v * mul_[r] + add_[r]) & mask_;
            v = reverse_bits(v) >> (64 - scale_);
        }
        return v;
    }

private:
    static constexpr int kRounds = 3;
    int scale_;
    std::uint64_t mask_;
    std::uint64_t mul_[kRounds];
    std::uint64_t add_[kRounds];
};

// Quadrant thresholds on a 32-bit uniform draw u: (0,0) if u < t[0], (0,1) if u < t[1],
// (1,0) if u < t[2], else (1,1). Integer compares keep the choice exact and cheap; 2^-32 is far
// below any meaningful difference in the probabilities.
struct Thresholds {
    std::uint64_t t[3];

    explicit Thresholds(const RmatOptions& o)
    {
        const double cumulative[3] = {o.a, o.a + o.b, o.a + o.b + o.c};
        for (int q = 0; q < 3; ++q) {
            t[q] = static_cast<std::uint64_t>(std::llround(std::ldexp(cumulative[q], 32)));
        }
    }

    // Appends one level's (src bit, dst bit) to src and dst. Branch-free: the quadrant is random,
    // so branches on it would mispredict about once per level. With g_q = (u >= t[q]), the
    // quadrants give (g_0, g_1, g_2) = 000, 100, 110, 111: src is g_1 and dst the parity.
    void descend(std::uint64_t u, std::uint64_t& src, std::uint64_t& dst) const noexcept
    {
        const std::uint64_t g0 = u >= t[0];
        const std::uint64_t g1 = u >= t[1];
        const std::uint64_t g2 = u >= t[2];
        src = (src << 1) | g1;
        dst = (dst << 1) | (g0 ^ g1 ^ g2);
    }
};

}  // namespace

void validate(const RmatOptions& o)
{
    if (o.scale < 1 || o.scale > kMaxScale) {
        HALO_THROW(InputError, "R-MAT scale ", o.scale, " is outside 1..", kMaxScale);
    }
    if (!std::isfinite(o.edge_factor) || !(o.edge_factor > 0.0)) {
        HALO_THROW(InputError, "R-MAT edge factor ", o.edge_factor, " must be a finite number > 0");
    }
    const struct {
        const char* name;
        double value;
    } probabilities[] = {{"a", o.a}, {"b", o.b}, {"c", o.c}};
    for (const auto& [name, p] : probabilities) {
        if (!(p > 0.0 && p < 1.0)) {
            HALO_THROW(InputError, "R-MAT probability ", name, " = ", p, " is outside (0, 1)");
        }
    }
    if (!(o.a + o.b + o.c < 1.0)) {
        HALO_THROW(InputError, "R-MAT probabilities a + b + c = ", o.a, " + ", o.b, " + ", o.c,
                   " = ", o.a + o.b + o.c, " leave no room for d = 1 - a - b - c > 0");
    }
    const double edges = std::ldexp(o.edge_factor, o.scale);
    if (!(std::round(edges) <= static_cast<double>(detail::kMaxStreams))) {
        HALO_THROW(InputError, "R-MAT edge factor ", o.edge_factor, " at scale ", o.scale,
                   " asks for ", edges, " edges, more than the generator's 2^",
                   64 - detail::kStreamBits);
    }
}

std::int64_t rmat_num_edges(const RmatOptions& options)
{
    validate(options);
    return std::llround(std::ldexp(options.edge_factor, options.scale));
}

EdgeList generate_rmat(const RmatOptions& options)
{
    return generate_rmat(options, 0, rmat_num_edges(options));
}

EdgeList generate_rmat(const RmatOptions& options, std::int64_t first_edge, std::int64_t last_edge)
{
    const std::int64_t total = rmat_num_edges(options);
    HALO_EXPECTS(0 <= first_edge && first_edge <= last_edge && last_edge <= total, "edge range [",
                 first_edge, ", ", last_edge, ") outside [0, ", total, ")");
    const std::int64_t m = last_edge - first_edge;
    const int scale = options.scale;
    const detail::RngKey key(options.seed, kRmatEdgeDomain);
    const Thresholds thresholds(options);
    const Scrambler scramble(scale, options.seed);
    const bool relabel = options.scramble;

    EdgeList edges;
    edges.num_nodes = std::int64_t{1} << scale;
    // Resident on every core first: zero-filling 16 bytes per edge page fault by page fault on
    // one thread costs seconds at R-MAT 26 (detail::populate_pages).
    edges.src = detail::resident_vector<global_id>(static_cast<std::size_t>(m));
    edges.dst = detail::resident_vector<global_id>(static_cast<std::size_t>(m));
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < m; ++e) {
        detail::CounterStream rng(key, static_cast<std::uint64_t>(first_edge + e));
        std::uint64_t src = 0;
        std::uint64_t dst = 0;
        // One 64-bit draw decides two levels, one per 32-bit half.
        for (int level = 0; level < scale; level += 2) {
            const std::uint64_t bits = rng.next();
            thresholds.descend(bits & 0xffffffffULL, src, dst);
            if (level + 1 < scale) {
                thresholds.descend(bits >> 32, src, dst);
            }
        }
        if (relabel) {
            src = scramble(src);
            dst = scramble(dst);
        }
        edges.src[e] = static_cast<global_id>(src);
        edges.dst[e] = static_cast<global_id>(dst);
    }
    return edges;
}

// Command-line specs ------------------------------------------------------------------------------

namespace {

std::vector<std::string_view> split_fields(std::string_view text)
{
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    while (true) {
        const auto colon = text.find(':', start);
        fields.push_back(text.substr(start, colon - start));
        if (colon == std::string_view::npos) {
            return fields;
        }
        start = colon + 1;
    }
}

// Parses the whole field as a T (integer or floating point) or throws naming spec and field.
template <typename T>
T parse_field(std::string_view spec, std::string_view name, std::string_view field)
{
    T value{};
    const char* first = field.data();
    const char* last = field.data() + field.size();
    const auto result = std::from_chars(first, last, value);
    const char* kind = std::is_floating_point_v<T> ? "a number"
                       : std::is_unsigned_v<T>     ? "a non-negative integer"
                                                   : "an integer";
    if (field.empty() || result.ec == std::errc::invalid_argument || result.ptr != last) {
        HALO_THROW(InputError, "graph spec '", spec, "': ", name, " '", field, "' is not ", kind);
    }
    if (result.ec == std::errc::result_out_of_range) {
        HALO_THROW(InputError, "graph spec '", spec, "': ", name, " '", field, "' is out of range");
    }
    return value;
}

template <typename Options>
Options checked(std::string_view spec, Options options)
{
    try {
        validate(options);
    } catch (const InputError& e) {
        HALO_THROW(InputError, "graph spec '", spec, "': ", e.message());
    }
    return options;
}

std::string format_double(double value)
{
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    return std::string(buffer, result.ptr);
}

}  // namespace

GraphSpec parse_graph_spec(std::string_view text)
{
    const auto fields = split_fields(text);
    const auto kind = fields.front();
    const auto count = fields.size();
    if (kind == "rmat") {
        if (count != 3 && count != 4) {
            HALO_THROW(InputError, "graph spec '", text, "': expected rmat:SCALE:EF[:SEED], got ",
                       count, " field(s)");
        }
        RmatOptions o;
        o.scale = parse_field<int>(text, "SCALE", fields[1]);
        o.edge_factor = parse_field<double>(text, "EF", fields[2]);
        o.seed =
            count == 4 ? parse_field<std::uint64_t>(text, "SEED", fields[3]) : kDefaultGraphSeed;
        return checked(text, o);
    }
    if (kind == "er") {
        if (count != 3 && count != 4) {
            HALO_THROW(InputError, "graph spec '", text, "': expected er:N:M[:SEED], got ", count,
                       " field(s)");
        }
        ErdosRenyiOptions o;
        o.num_nodes = parse_field<std::int64_t>(text, "N", fields[1]);
        o.num_edges = parse_field<std::int64_t>(text, "M", fields[2]);
        o.seed =
            count == 4 ? parse_field<std::uint64_t>(text, "SEED", fields[3]) : kDefaultGraphSeed;
        return checked(text, o);
    }
    HALO_THROW(InputError, "graph spec '", text, "': unknown generator '", kind,
               "' (expected rmat:SCALE:EF[:SEED] or er:N:M[:SEED])");
}

std::string to_string(const GraphSpec& spec)
{
    if (const auto* r = std::get_if<RmatOptions>(&spec)) {
        std::string out = "rmat:" + std::to_string(r->scale) + ":" + format_double(r->edge_factor) +
                          ":" + std::to_string(r->seed);
        const RmatOptions defaults;
        if (r->a != defaults.a || r->b != defaults.b || r->c != defaults.c || !r->scramble) {
            out += " (a=" + format_double(r->a) + ", b=" + format_double(r->b) +
                   ", c=" + format_double(r->c) + (r->scramble ? "" : ", unscrambled") + ")";
        }
        return out;
    }
    const auto& e = std::get<ErdosRenyiOptions>(spec);
    return "er:" + std::to_string(e.num_nodes) + ":" + std::to_string(e.num_edges) + ":" +
           std::to_string(e.seed);
}

std::int64_t num_edges(const GraphSpec& spec)
{
    if (const auto* r = std::get_if<RmatOptions>(&spec)) {
        return rmat_num_edges(*r);
    }
    const auto& e = std::get<ErdosRenyiOptions>(spec);
    validate(e);
    return e.num_edges;
}

EdgeList generate(const GraphSpec& spec, std::int64_t first_edge, std::int64_t last_edge)
{
    if (const auto* r = std::get_if<RmatOptions>(&spec)) {
        return generate_rmat(*r, first_edge, last_edge);
    }
    return generate_erdos_renyi(std::get<ErdosRenyiOptions>(spec), first_edge, last_edge);
}

EdgeList generate(const GraphSpec& spec)
{
    if (const auto* r = std::get_if<RmatOptions>(&spec)) {
        return generate_rmat(*r);
    }
    return generate_erdos_renyi(std::get<ErdosRenyiOptions>(spec));
}

}  // namespace halo
