// HaloGNN binary CSR (.hcsr). A random mutation rarely keeps the CRC-32 right, so with an odd first
// byte the rest of the input gets its correct checksum appended: the header and array checks
// behind the checksum are reached too.
#include <zlib.h>

#include <cstring>
#include <string>

#include "fuzz_common.hpp"
#include "halo/core/io.hpp"

HALO_FUZZ_INITIALIZE

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string bytes(halo::fuzz::as_text(data, size));
    if (size > 0 && data[0] % 2 == 1) {
        bytes.erase(0, 1);
        const auto crc = static_cast<std::uint32_t>(crc32(
            0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
        char tail[4];
        std::memcpy(tail, &crc, 4);
        bytes.append(tail, 4);
    }
    const auto path = halo::fuzz::write_input(bytes, "input.hcsr");
    return halo::fuzz::run_one([&] { static_cast<void>(halo::read_binary_csr(path)); });
}
