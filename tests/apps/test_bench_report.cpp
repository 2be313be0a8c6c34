// halo-bench's one report (apps/bench_report.hpp) on the host: the row layout that every mode's
// JSON readers (bench/make_table.py, order_table.py, gather_check.py, test_cli.sh) rely on, the
// header without a device, the table and the failure count. No device is opened.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_report.hpp"

namespace halo::bench_app {
namespace {

MeasuredRow timed_row()
{
    MeasuredRow row;
    row.name = "mergepath";
    row.params = {{"feature_type", "fp32"}, {"dim", 64}};
    row.time = {{2.0, 1.5, 3.0}, 7};
    row.check = {"elements", 1000, 0, Json{{"max_rel_error", 1e-7}}};
    row.set_checked_status();
    row.set_compulsory_bytes(4'000'000'000, 4000.0);  // 4 GB in 2 ms: 2000 GB/s of 4000
    row.add_ratio("speedup_vs_baseline", "vs cusparse", 3.0);
    row.add_ratio("speedup_vs_other", "vs other", 0.0);  // not measured: null
    row.measured["gflop_per_s"] = 12.5;
    row.cells = {{"GFLOP/s", "12.5"}};
    return row;
}

TEST(BenchReport, TimedRowKeepsTheFieldNamesReadersUse)
{
    const auto j = row_json(timed_row());
    EXPECT_EQ(j["kernel"], "mergepath");
    EXPECT_EQ(j["feature_type"], "fp32");
    EXPECT_EQ(j["dim"], 64);
    EXPECT_EQ(j["status"], "ok");
    EXPECT_FALSE(j.contains("message"));
    EXPECT_DOUBLE_EQ(j["time_ms"]["median"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(j["time_ms"]["min"].get<double>(), 1.5);
    EXPECT_DOUBLE_EQ(j["time_ms"]["max"].get<double>(), 3.0);
    EXPECT_EQ(j["buffer_sets"], 7);
    EXPECT_EQ(j["compulsory_bytes"], 4'000'000'000);
    EXPECT_DOUBLE_EQ(j["roofline_fraction"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(j["speedup_vs_baseline"].get<double>(), 1.5);
    EXPECT_TRUE(j["speedup_vs_other"].is_null());
    EXPECT_DOUBLE_EQ(j["gflop_per_s"].get<double>(), 12.5);
    EXPECT_EQ(j["check"]["elements"], 1000);
    EXPECT_EQ(j["check"]["bad_elements"], 0);
    EXPECT_DOUBLE_EQ(j["check"]["max_rel_error"].get<double>(), 1e-7);
    // The name, the parameters and the status lead, in that order.
    std::vector<std::string> keys;
    for (const auto& item : j.items()) {
        keys.push_back(item.key());
    }
    ASSERT_GE(keys.size(), 4u);
    EXPECT_EQ((std::vector<std::string>(keys.begin(), keys.begin() + 4)),
              (std::vector<std::string>{"kernel", "feature_type", "dim", "status"}));
}

TEST(BenchReport, RowsCheckedByRowsAndNamedVariants)
{
    MeasuredRow row;
    row.name_key = "variant";
    row.name = "maxk";
    row.params = {{"k", 8}, {"buffers_per_warp", nullptr}};
    row.time = {{1.0, 1.0, 1.0}, 2};
    row.check = {"rows", 50, 3, Json::object()};
    row.set_checked_status();
    const auto j = row_json(row);
    EXPECT_EQ(j["variant"], "maxk");
    EXPECT_FALSE(j.contains("kernel"));
    EXPECT_TRUE(j["buffers_per_warp"].is_null());
    EXPECT_EQ(j["status"], "FAILED");
    EXPECT_EQ(j["check"]["rows"], 50);
    EXPECT_EQ(j["check"]["bad_rows"], 3);
    EXPECT_FALSE(j.contains("compulsory_bytes"));  // never set: left out
    EXPECT_FALSE(j.contains("roofline_fraction"));
}

TEST(BenchReport, UntimedRowsCarryNoMeasurement)
{
    auto row = timed_row();
    row.status = "ERROR";
    row.message = "cudaErrorMemoryAllocation";
    const auto j = row_json(row);
    EXPECT_EQ(j["message"], "cudaErrorMemoryAllocation");
    for (const auto* key : {"time_ms", "buffer_sets", "compulsory_bytes", "roofline_fraction",
                            "speedup_vs_baseline", "gflop_per_s", "check"}) {
        EXPECT_FALSE(j.contains(key)) << key;
    }
    auto skipped = timed_row();
    skipped.status = "SKIPPED";
    EXPECT_FALSE(row_json(skipped).contains("time_ms"));

    std::vector<MeasuredRow> rows{timed_row(), row, skipped};
    rows[0].status = "FAILED";
    EXPECT_EQ(count_failures(rows), 2);  // FAILED and ERROR; SKIPPED is no failure
    EXPECT_EQ(rows_json(rows).size(), 3u);
}

TEST(BenchReport, RatioNeedsBothMedians)
{
    MeasuredRow row;  // not timed: median 0
    row.add_ratio("speedup_vs_x", "vs x", 2.0);
    EXPECT_FALSE(row.ratios.front().value.has_value());
    EXPECT_DOUBLE_EQ(roofline_fraction(1e9, 1.0, 2000.0), 0.5);
}

TEST(BenchReport, HeaderWithoutDeviceAndDocument)
{
    const ReportHeader header{"halo-bench --e2e", "2026-12-07T00:00:00Z", "halo-bench --e2e"};
    const auto h = header_json(header);
    EXPECT_EQ(h["tool"], "halo-bench --e2e");
    EXPECT_EQ(h["date"], "2026-12-07T00:00:00Z");
    EXPECT_EQ(h["command"], "halo-bench --e2e");
    EXPECT_TRUE(h["git_commit"].is_string());
    EXPECT_EQ(h["device"], Json({{"name", "cpu"}}));
    EXPECT_TRUE(h["copy_bandwidth"].is_null());
    EXPECT_FALSE(h.contains("graph"));

    KernelRunOptions run;
    run.warmup = 2;
    run.runs = 5;
    const auto settings = run_settings(run);
    EXPECT_EQ(settings, Json({{"warmup", 2}, {"runs", 5}, {"seed", 1}}));

    const auto path = std::filesystem::temp_directory_path() /
                      ("test_bench_report_" + std::to_string(::getpid()) + ".json");
    write_report(path.string(), header, settings, {{"records", rows_json({timed_row()})}});
    std::ifstream in(path);
    const auto doc = Json::parse(in);
    std::filesystem::remove(path);
    std::vector<std::string> keys;
    for (const auto& item : doc.items()) {
        keys.push_back(item.key());
    }
    EXPECT_EQ(keys, (std::vector<std::string>{"tool", "date", "git_commit", "command", "device",
                                              "copy_bandwidth", "settings", "records"}));
    EXPECT_EQ(doc["records"][0]["kernel"], "mergepath");
}

TEST(BenchReport, TableHasOneLinePerRowAndEveryColumn)
{
    auto error = timed_row();
    error.status = "ERROR";
    error.message = "no plan";
    testing::internal::CaptureStdout();
    print_table({timed_row(), error}, "legend line");
    const auto out = testing::internal::GetCapturedStdout();
    for (const auto* text : {"kernel", "feature_type", "dim", "sets", "median ms", "%copy",
                             "vs cusparse", "vs other", "GFLOP/s", "bad", "status", "50.0%",
                             "1.500x", "2.0000", "0/1000", "ERROR: no plan", "legend line"}) {
        EXPECT_NE(out.find(text), std::string::npos) << text << " missing from\n" << out;
    }
}

TEST(BenchReport, ProgressLineShowsWhatIsKnown)
{
    testing::internal::CaptureStdout();
    print_row(timed_row());
    const auto out = testing::internal::GetCapturedStdout();
    for (const auto* text : {"mergepath feature_type fp32 dim 64: median 2.0000 ms", "50.0% copy",
                             "vs cusparse 1.500x", "GFLOP/s 12.5", "bad 0 of 1000 elements: ok"}) {
        EXPECT_NE(out.find(text), std::string::npos) << text << " missing from\n" << out;
    }
    EXPECT_EQ(out.find("vs other"), std::string::npos) << out;  // not measured: left out
}

}  // namespace
}  // namespace halo::bench_app
