// make_backend and its checks on the CPU: which SpMM names a backend takes, aes specs, and the
// backend (and plan) a spec makes.
#include <string>

#include "halo/core/csr.hpp"
#include "halo/core/error.hpp"
#include "halo/engine/backend_spec.hpp"
#include "halo/kernels_host/spmm_registry.hpp"
#include "halo_test.hpp"

namespace {

halo::BackendSpec spec(const std::string& kind, const std::string& spmm)
{
    halo::BackendSpec s;
    s.kind = kind;
    s.spmm = spmm;
    return s;
}

// The message of the halo::InputError that fn throws, or "" when it throws none.
template <typename Fn>
std::string input_error(Fn&& fn)
{
    try {
        fn();
    } catch (const halo::InputError& e) {
        return e.message();
    }
    return {};
}

TEST(BackendSpec, ParsesAesSpecs)
{
    EXPECT_FALSE(halo::parse_aes_spmm("cusparse").has_value());
    EXPECT_FALSE(halo::parse_aes_spmm("").has_value());
    const auto aes = halo::parse_aes_spmm("aes:32");
    ASSERT_TRUE(aes.has_value());
    EXPECT_EQ(aes->sample_width, 32);
    EXPECT_NE(input_error([] { halo::parse_aes_spmm("aes:x"); }).find("is not a sample width"),
              std::string::npos);
    EXPECT_NE(input_error([] { halo::parse_aes_spmm("aes:5"); }).find("W = 5 outside"),
              std::string::npos);
}

TEST(BackendSpec, CpuTakesTheReferenceOrAes)
{
    for (const char* ok : {"", "auto", "aes:16", "aes:64:rescaled"}) {
        EXPECT_EQ(input_error([&] { halo::check_backend_spec(spec("cpu", ok)); }), "") << ok;
    }
    // Every kernel halo-infer offers but auto (the reference there) and those written with
    // arguments (aes) is a CUDA kernel.
    int cuda_only = 0;
    for (const auto* kernel : halo::spmm_kernels(halo::spmm_use_infer)) {
        if (kernel->name == "auto" || kernel->parse_arguments != nullptr) {
            continue;
        }
        ++cuda_only;
        EXPECT_NE(input_error([&] {
                      halo::check_backend_spec(spec("cpu", kernel->name));
                  }).find("needs --backend cuda"),
                  std::string::npos)
            << kernel->name;
    }
    EXPECT_GE(cuda_only, 3);
    EXPECT_NE(input_error([] { halo::check_backend_spec(spec("tpu", "")); }).find("unknown"),
              std::string::npos);
    // The GPU-only switches.
    auto hinted = spec("cpu", "");
    hinted.l2_hints = true;
    EXPECT_NE(input_error([&] {
                  halo::check_backend_spec(hinted);
              }).find("--l2-hints needs --backend cuda"),
              std::string::npos);
#ifndef HALO_HAVE_CUDA
    EXPECT_NE(
        input_error([] { halo::check_backend_spec(spec("cuda", "")); }).find("built without CUDA"),
        std::string::npos);
#endif
}

TEST(BackendSpec, MakesTheCpuBackend)
{
    const auto exact = halo::make_backend(spec("cpu", ""));
    ASSERT_NE(exact.backend, nullptr);
    EXPECT_EQ(exact.context, nullptr);
    EXPECT_EQ(exact.backend->name(), "cpu");
    halo::Csr a;
    a.num_rows = 2;
    a.num_cols = 2;
    a.indptr = {0, 1, 2};
    a.indices = {1, 0};
    EXPECT_EQ(exact.backend->make_spmm_plan(a)->algorithm(), "reference");
    const auto aes = halo::make_backend(spec("cpu", "aes:16"));
    EXPECT_NE(aes.backend->make_spmm_plan(a)->algorithm().find("aes-w16"), std::string::npos);
    EXPECT_THROW(halo::make_backend(spec("cpu", "mergepath")), halo::InputError);
}

}  // namespace
