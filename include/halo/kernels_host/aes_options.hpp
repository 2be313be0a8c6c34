// AES-SpMM's options (halo/kernels_host/aes.hpp has the sampling rule and the CPU reference):
// apart, so that the generic Backend (halo/kernels_host/backend.hpp) names them without the rest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace halo {

/// W's range in the paper's evaluation (section 4: W from 16 to 1024).
inline constexpr std::int64_t kAesMinWidth = 16;
inline constexpr std::int64_t kAesMaxWidth = 1024;
/// prime_num of Eq. 3.
inline constexpr std::int64_t kAesPrime = 1429;

/// How a sampled row's sum becomes its output.
enum class AesScaling {
    /// The plain sum of the sampled products: Algorithm 1, line 17, the paper's choice. A row that
    /// lost nonzeros sums fewer terms (biased towards zero for non-negative operators).
    sample_sum,
    /// The sampled sum times row_nnz / sampled (sampled counts repeated nonzeros): an estimate of
    /// the full row sum. Not in the paper; exact rows are unaffected (the factor is 1).
    rescaled,
};

/// "sample_sum" | "rescaled"; anything else throws halo::InputError naming the value.
AesScaling parse_aes_scaling(std::string_view text);
std::string to_string(AesScaling scaling);

struct AesOptions {
    /// W, the shared-memory width of the paper: at most W sampled nonzeros per row. [16, 1024].
    std::int64_t sample_width = 128;
    AesScaling scaling = AesScaling::sample_sum;
};

/// Throws halo::InputError naming the value when sample_width lies outside [16, 1024].
void validate(const AesOptions& options);

}  // namespace halo
