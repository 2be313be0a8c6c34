// Edge lists, plain or gzip (the reader detects gzip by its magic bytes; the seeds hold both).
#include "fuzz_common.hpp"
#include "halo/core/io.hpp"

HALO_FUZZ_INITIALIZE

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto path = halo::fuzz::write_input(halo::fuzz::as_text(data, size), "input.el");
    return halo::fuzz::run_one([&] {
        halo::GraphReadOptions options;
        options.num_nodes = size > 0 && data[0] % 2 == 0 ? -1 : 64;
        static_cast<void>(halo::read_edge_list(path, options));
    });
}
