// HDF5 datasets (halo-partition's output), from a temporary file: the root attributes, then every
// part as halo-infer's ranks read them (at most 8).
#include <algorithm>

#include "fuzz_common.hpp"
#include "halo/store/store.hpp"

HALO_FUZZ_INITIALIZE

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto path = halo::fuzz::write_input(halo::fuzz::as_text(data, size), "dataset.h5");
    return halo::fuzz::run_one([&] {
        const auto info = halo::read_dataset_info(path);
        for (int p = 0; p < std::min(info.num_parts, 8); ++p) {
            static_cast<void>(halo::read_shard(path, p));
        }
    });
}
