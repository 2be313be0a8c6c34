// Matrix Market coordinate files.
#include "fuzz_common.hpp"
#include "halo/core/io.hpp"

HALO_FUZZ_INITIALIZE

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto path = halo::fuzz::write_input(halo::fuzz::as_text(data, size), "input.mtx");
    return halo::fuzz::run_one([&] { static_cast<void>(halo::read_matrix_market(path)); });
}
