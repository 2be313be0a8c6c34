// halo-infer's results, from temporary files: with an even first byte the rest is a result piece
// (per-rank HDF5 file), with an odd one the manifest.json of a results directory, read with
// read_results (whose pieces are then missing or the last piece fuzzed).
#include "fuzz_common.hpp"
#include "halo/core/result.hpp"

HALO_FUZZ_INITIALIZE

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size == 0) {
        return 0;
    }
    const auto rest = halo::fuzz::as_text(data + 1, size - 1);
    if (data[0] % 2 == 0) {
        const auto path = halo::fuzz::write_input(rest, "part-0.h5");
        return halo::fuzz::run_one([&] { static_cast<void>(halo::read_result_piece(path)); });
    }
    const auto manifest = halo::fuzz::write_input(rest, "manifest.json");
    return halo::fuzz::run_one(
        [&] { static_cast<void>(halo::read_results(manifest.parent_path())); });
}
