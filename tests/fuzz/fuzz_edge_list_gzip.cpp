// Edge lists behind gzip: the input's text compressed (the parser behind a valid stream), or the
// input appended to the gzip magic bytes (a corrupt or truncated stream), chosen by the first byte.
#include <zlib.h>

#include <string>

#include "fuzz_common.hpp"
#include "halo/core/io.hpp"

HALO_FUZZ_INITIALIZE

namespace {

std::string gzip(std::string_view text)
{
    z_stream z{};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
        std::abort();
    }
    std::string out(deflateBound(&z, static_cast<uLong>(text.size())) + 32, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    z.avail_in = static_cast<uInt>(text.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
        std::abort();
    }
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0) {
        return 0;
    }
    const auto rest = halo::fuzz::as_text(data + 1, size - 1);
    const auto bytes =
        data[0] % 2 == 0 ? gzip(rest) : std::string("\x1f\x8b", 2) + std::string(rest);
    const auto path = halo::fuzz::write_input(bytes, "input.el.gz");
    return halo::fuzz::run_one([&] { static_cast<void>(halo::read_edge_list(path)); });
}
