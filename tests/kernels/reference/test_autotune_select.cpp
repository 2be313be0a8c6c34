// The autotuner's selection logic (include/halo/kernels_host/autotune.hpp) with fake timings, no
// GPU: the fastest median wins, a choice is cached (measure is not called again), ties go to the
// lower index, the warm-up call is not counted, a candidate that rejects the shape is skipped and
// reported, and all failing is an error naming the key.
#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/kernels_host/autotune.hpp"

namespace {

const std::vector<std::string> kNames = {"cusparse", "accel_gcn", "mergepath", "rowsplit"};

// Replays a fixed sequence of times per candidate (warm-up first) and counts the calls.
struct FakeTimer {
    std::map<std::size_t, std::vector<double>> times;
    std::map<std::size_t, std::size_t> calls;

    double operator()(std::size_t i)
    {
        const auto& seq = times.at(i);
        const auto n = calls[i]++;
        return seq.at(n % seq.size());
    }
};

TEST(AutotuneSelect, PicksTheFastestMedianAndIgnoresTheWarmup)
{
    halo::AutotuneTable table;
    FakeTimer fake;
    // Warm-up first (ignored), then three trials; medians 0.034, 0.025, 0.021, 0.090. accel_gcn's
    // minimum (0.001) is below mergepath's median but its median is not: the median decides.
    fake.times[0] = {9.0, 0.034, 0.030, 0.040};
    fake.times[1] = {9.0, 0.001, 0.025, 0.050};
    fake.times[2] = {0.0001, 0.021, 0.022, 0.020};
    fake.times[3] = {9.0, 0.090, 0.090, 0.090};
    const auto& c = table.choose({0, 812, 64}, kNames, std::ref(fake));
    EXPECT_EQ(c.index, 2u);
    EXPECT_DOUBLE_EQ(c.median_ms[0], 0.034);
    EXPECT_DOUBLE_EQ(c.median_ms[1], 0.025);
    EXPECT_DOUBLE_EQ(c.median_ms[2], 0.021);
    EXPECT_DOUBLE_EQ(c.median_ms[3], 0.090);
    for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(fake.calls[i], 4u) << "1 warm-up + 3 trials for candidate " << i;
    }
    EXPECT_EQ(table.report(),
              "rows [0, 812) d=64: mergepath 0.021 ms (cusparse 0.034, "
              "accel_gcn 0.025, rowsplit 0.090)\n");
}

TEST(AutotuneSelect, CachesPerKeyAndMeasuresNewKeys)
{
    halo::AutotuneTable table(5, 2);
    FakeTimer fake;
    fake.times[0] = {1.0};
    fake.times[1] = {2.0};
    EXPECT_EQ(table.choose({0, 10, 32}, {"a", "b"}, std::ref(fake)).index, 0u);
    EXPECT_EQ(fake.calls[0], 7u);
    EXPECT_EQ(fake.calls[1], 7u);
    // Same key: cached, even though "b" would now be faster.
    fake.times[0] = {5.0};
    const auto& again = table.choose({0, 10, 32}, {"a", "b"}, [&](std::size_t) -> double {
        ADD_FAILURE() << "measure called for a cached key";
        return 0.0;
    });
    EXPECT_EQ(again.index, 0u);
    EXPECT_EQ(fake.calls[0], 7u);
    // Another width or range is a new key and is measured.
    EXPECT_EQ(table.choose({0, 10, 33}, {"a", "b"}, std::ref(fake)).index, 1u);
    EXPECT_EQ(table.choose({0, 9, 32}, {"a", "b"}, std::ref(fake)).index, 1u);
    EXPECT_EQ(table.size(), 3u);
    ASSERT_NE(table.find({0, 10, 32}), nullptr);
    EXPECT_EQ(table.find({0, 10, 32})->index, 0u);
    EXPECT_EQ(table.find({1, 10, 32}), nullptr);
    EXPECT_EQ(table.report(),
              "rows [0, 9) d=32: b 2.000 ms (a 5.000)\n"
              "rows [0, 10) d=32: a 1.000 ms (b 2.000)\n"
              "rows [0, 10) d=33: b 2.000 ms (a 5.000)\n");
}

TEST(AutotuneSelect, TiesGoToTheLowerIndex)
{
    halo::AutotuneTable table;
    FakeTimer fake;
    fake.times[0] = {0.5};
    fake.times[1] = {0.5};
    fake.times[2] = {0.5};
    EXPECT_EQ(table.choose({0, 1, 1}, {"cusparse", "x", "y"}, std::ref(fake)).index, 0u);
    fake.times[0] = {0.7};
    EXPECT_EQ(table.choose({0, 2, 1}, {"cusparse", "x", "y"}, std::ref(fake)).index, 1u);
}

TEST(AutotuneSelect, RejectingCandidatesAreSkippedAndReported)
{
    halo::AutotuneTable table;
    FakeTimer fake;
    fake.times[1] = {0.2};
    fake.times[3] = {0.1};
    int device_calls = 0;
    const auto measure = [&](std::size_t i) -> double {
        if (i == 0) {
            HALO_EXPECTS(false, "dense width 64 exceeds the plan's max_dim 32");
        }
        if (i == 3 && device_calls++ == 1) {
            // A rejection after the warm-up (in the timed trials) skips the candidate too.
            HALO_THROW(halo::InputError, "rows out of range");
        }
        if (i == 2) {
            HALO_THROW(halo::InputError, "too many nonzeros for int4 metadata");
        }
        return fake(i);
    };
    const auto& c = table.choose({3, 7, 64}, kNames, measure);
    EXPECT_EQ(c.index, 1u);
    EXPECT_FALSE(c.failures[0].empty());
    EXPECT_TRUE(c.failures[1].empty());
    EXPECT_NE(c.failures[2].find("int4 metadata"), std::string::npos);
    EXPECT_NE(c.failures[3].find("rows out of range"), std::string::npos);
    const auto report = table.report();
    EXPECT_EQ(report.rfind("rows [3, 7) d=64: accel_gcn 0.200 ms (cusparse failed: ", 0), 0u)
        << report;
    EXPECT_NE(report.find("max_dim 32"), std::string::npos) << report;
    EXPECT_NE(report.find("mergepath failed: "), std::string::npos) << report;
    EXPECT_NE(report.find("rowsplit failed: "), std::string::npos) << report;
}

TEST(AutotuneSelect, AllFailingIsAnErrorAndNothingIsCached)
{
    halo::AutotuneTable table;
    const auto reject = [](std::size_t i) -> double {
        HALO_THROW(halo::InputError, "candidate ", i, " rejects the shape");
    };
    try {
        table.choose({0, 5, 100}, {"a", "b"}, reject);
        FAIL() << "expected halo::InputError";
    } catch (const halo::InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("rows [0, 5) d=100"), std::string::npos) << what;
        EXPECT_NE(what.find("candidate 0 rejects"), std::string::npos) << what;
        EXPECT_NE(what.find("candidate 1 rejects"), std::string::npos) << what;
    }
    EXPECT_EQ(table.size(), 0u);
    EXPECT_EQ(table.report(), "");
}

TEST(AutotuneSelect, OtherErrorsPropagateAndBadInputsAreRejected)
{
    halo::AutotuneTable table;
    // A device failure is not a rejected shape: it must surface, not be skipped.
    EXPECT_THROW(table.choose({0, 1, 1}, {"a", "b"},
                              [](std::size_t) -> double { throw std::runtime_error("xid"); }),
                 std::runtime_error);
    EXPECT_THROW(table.choose({0, 1, 1}, {}, [](std::size_t) { return 1.0; }), halo::LogicError);
    EXPECT_THROW(table.choose({0, 1, 1}, {"a"},
                              [](std::size_t) { return std::numeric_limits<double>::quiet_NaN(); }),
                 halo::LogicError);
    EXPECT_THROW(table.choose({0, 1, 1}, {"a"}, [](std::size_t) { return -1.0; }),
                 halo::LogicError);
    EXPECT_THROW(halo::AutotuneTable(0), halo::LogicError);
    EXPECT_THROW(halo::AutotuneTable(3, -1), halo::LogicError);
    EXPECT_EQ(table.size(), 0u);
}

// 16-bit X gets choices of its own: the same range and width in bf16 is a new key, timed again,
// and named with its type in the report and errors.
TEST(AutotuneSelect, ElementTypeIsPartOfTheKey)
{
    halo::AutotuneTable table(1, 0);
    const std::vector<std::string> names{"cusparse", "mergepath"};
    int calls = 0;
    const auto& fp32 = table.choose({0, 10, 64}, names, [&](std::size_t i) {
        ++calls;
        return i == 0 ? 1.0 : 2.0;
    });
    EXPECT_EQ(fp32.index, 0u);
    const auto& bf16 =
        table.choose({0, 10, 64, halo::FeatureType::bf16}, names, [&](std::size_t i) {
            ++calls;
            if (i == 0) {
                HALO_THROW(halo::InputError, "cusparse reads fp32 X only, not bf16");
            }
            return 2.0;
        });
    EXPECT_EQ(bf16.index, 1u);
    EXPECT_EQ(calls, 4);  // fp32: both candidates; bf16: cuSPARSE's refusal and MergePath
    EXPECT_EQ(table.size(), 2u);
    const auto report = table.report();
    EXPECT_NE(report.find("rows [0, 10) d=64: cusparse"), std::string::npos) << report;
    EXPECT_NE(report.find("rows [0, 10) d=64 bf16: mergepath 2.000 ms (cusparse failed: "
                          "cusparse reads fp32 X only, not bf16"),
              std::string::npos)
        << report;
    EXPECT_EQ(halo::to_string(halo::AutotuneKey{5, 9, 32, halo::FeatureType::fp16}),
              "rows [5, 9) d=32 fp16");
}

}  // namespace
