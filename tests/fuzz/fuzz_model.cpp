// HDF5 model files (read_model), from a temporary file.
#include "fuzz_common.hpp"
#include "halo/core/model.hpp"
#include "halo/store/model_file.hpp"

HALO_FUZZ_INITIALIZE

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto path = halo::fuzz::write_input(halo::fuzz::as_text(data, size), "model.h5");
    return halo::fuzz::run_one([&] { static_cast<void>(halo::read_model(path)); });
}
