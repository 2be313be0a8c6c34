// The int8 halo exchanger (a decorator over any HaloExchanger) and its CPU codec.
//
// The inner exchanger moves rows of float-sized words: a record of int8_record_bytes(cols) bytes
// is int8_record_words(cols) words, and no transport looks inside them (MPI and NCCL move floats
// as raw bytes; no arithmetic, so a NaN-patterned word travels unchanged).
#include "halo/comm/int8_exchanger.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

class Int8Exchanger final : public Int8HaloExchanger {
public:
    Int8Exchanger(const InnerExchangerFactory& make_inner, std::unique_ptr<Int8Codec> codec,
                  const Shard& shard, std::int64_t max_width);

    void start(DenseView<float> x) override;
    void finish() override;
    const ExchangeStats& stats() const override;
    void barrier() override { inner_->barrier(); }
    std::int64_t fp32_bytes_sent() const override { return fp32_sent_; }
    std::int64_t fp32_bytes_received() const override { return fp32_received_; }

private:
    [[noreturn]] void reject_row(std::int64_t k) const;

    Shard record_shard_;  // before inner_, which may keep a reference to it
    std::unique_ptr<Int8Codec> codec_;
    std::unique_ptr<HaloExchanger> inner_;
    std::vector<std::int32_t> sent_rows_;  // the feature shard's local ids of the records' rows
    HaloPlan plan_;                        // the feature shard's, for error messages
    std::int32_t part_;
    std::int64_t num_owned_;
    std::int64_t num_halo_;
    std::int64_t num_sent_;  // sent_rows_.size(): records [0, num_sent_) are sent, halo follows
    std::int64_t max_width_;

    bool in_flight_ = false;
    DenseView<float> x_{};
    std::int64_t fp32_sent_ = 0;
    std::int64_t fp32_received_ = 0;
    double start_seconds_ = 0.0;
    double finish_seconds_ = 0.0;
    mutable ExchangeStats stats_;
};

Int8Exchanger::Int8Exchanger(const InnerExchangerFactory& make_inner,
                             std::unique_ptr<Int8Codec> codec, const Shard& shard,
                             std::int64_t max_width)
    : record_shard_(int8_record_shard(shard)),
      codec_(std::move(codec)),
      sent_rows_(int8_sent_rows(shard)),
      plan_(shard.plan),
      part_(shard.part),
      num_owned_(shard.num_owned),
      num_halo_(shard.num_halo),
      num_sent_(static_cast<std::int64_t>(sent_rows_.size())),
      max_width_(max_width)
{
    HALO_EXPECTS(codec_ != nullptr, "the int8 exchanger needs a codec");
    HALO_EXPECTS(static_cast<bool>(make_inner), "the int8 exchanger needs an inner factory");
    const std::int64_t width = int8_exchange_width(max_width);
    inner_ = make_inner(record_shard_, width);
    HALO_EXPECTS(inner_ != nullptr, "the inner exchanger factory returned null");
    // The records are what the inner exchanger moves: its own memory where it has some.
    const auto record_rows = num_sent_ + num_halo_;
    codec_->prepare(sent_rows_, record_rows, width, inner_->allocate(record_rows * width));
}

void Int8Exchanger::start(DenseView<float> x)
{
    HALO_EXPECTS(!in_flight_, "start() called again before finish()");
    check_exchanged_matrix(x, num_owned_, num_halo_, 1, max_width_, "the int8 exchanger");

    const auto t0 = Clock::now();
    codec_->pack(x);
    const std::int64_t words = int8_record_words(x.cols);
    inner_->start(DenseView<float>{codec_->records(), num_sent_ + num_halo_, words, words});
    x_ = x;
    in_flight_ = true;
    const auto row_bytes = x.cols * static_cast<std::int64_t>(sizeof(float));
    fp32_sent_ += plan_.num_send() * row_bytes;
    fp32_received_ += num_halo_ * row_bytes;
    start_seconds_ += seconds_since(t0);
}

void Int8Exchanger::finish()
{
    HALO_EXPECTS(in_flight_, "finish() called without start()");
    const auto t0 = Clock::now();
    in_flight_ = false;
    inner_->finish();
    if (num_halo_ > 0) {
        codec_->unpack(num_sent_, DenseView<float>{x_.row(num_owned_), num_halo_, x_.cols, x_.ld});
    }
    // After the exchange, so that every peer completes it whatever this rank found.
    const std::int64_t bad = codec_->first_non_finite();
    finish_seconds_ += seconds_since(t0);
    if (bad >= 0) {
        reject_row(bad);
    }
}

const ExchangeStats& Int8Exchanger::stats() const
{
    // The inner exchanger's counts (the bytes that moved); the times include the quantization.
    stats_ = inner_->stats();
    stats_.start_seconds = start_seconds_;
    stats_.finish_seconds = finish_seconds_;
    return stats_;
}

void Int8Exchanger::reject_row(std::int64_t k) const
{
    const std::int32_t row = sent_rows_[static_cast<std::size_t>(k)];
    std::string peers;
    for (std::size_t b = 0; b < plan_.send_ranks.size(); ++b) {
        const auto first = plan_.send_rows.begin() + plan_.send_offsets[b];
        const auto last = plan_.send_rows.begin() + plan_.send_offsets[b + 1];
        if (std::binary_search(first, last, row)) {
            peers += (peers.empty() ? "" : ", ") + std::to_string(plan_.send_ranks[b]);
        }
    }
    const auto& ids = record_shard_.global_ids;
    const std::string id = static_cast<std::size_t>(k) < ids.size()
                               ? std::to_string(ids[static_cast<std::size_t>(k)])
                               : std::string("unknown");
    HALO_THROW(InputError, "int8 halo exchange on rank ", part_, ": owned row ", row,
               " (global id ", id,
               ") holds a NaN or an infinity, which int8 cannot encode; part(s) ", peers,
               " received it as NaN (--exchange fp32 sends such rows unchanged)");
}

// Host records; the words are floats only so that the inner exchanger can move them.
class CpuInt8Codec final : public Int8Codec {
public:
    void prepare(const std::vector<std::int32_t>& rows, std::int64_t record_rows,
                 std::int64_t max_record_words, std::shared_ptr<float> memory) override
    {
        HALO_EXPECTS(record_rows >= static_cast<std::int64_t>(rows.size()) && max_record_words >= 2,
                     "records of ", record_rows, " x ", max_record_words, " words for ",
                     rows.size(), " packed rows");
        HALO_EXPECTS(memory == nullptr, "the host codec keeps its records in host memory");
        rows_ = rows;
        records_.assign(
            static_cast<std::size_t>(std::max<std::int64_t>(record_rows * max_record_words, 1)),
            0.0f);
    }

    float* records() const noexcept override { return records_.data(); }

    void pack(DenseView<const float> x) override
    {
        auto* bytes = reinterpret_cast<std::uint8_t*>(records_.data());
        const auto count = static_cast<std::int64_t>(rows_.size());
        pack_rows_int8_reference(x, rows_.data(), count, bytes);
        // A row with a NaN or an infinity got a NaN scale (pack_rows_int8_reference).
        const std::int64_t record = int8_record_bytes(x.cols);
        first_bad_ = -1;
        for (std::int64_t k = 0; k < count && first_bad_ < 0; ++k) {
            float scale = 0.0f;
            std::memcpy(&scale, bytes + k * record + record - 8, sizeof(float));
            if (!std::isfinite(scale)) {
                first_bad_ = k;
            }
        }
    }

    void unpack(std::int64_t first, DenseView<float> y) override
    {
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(records_.data());
        unpack_rows_int8_reference(bytes + first * int8_record_bytes(y.cols), y);
    }

    std::int64_t first_non_finite() override { return first_bad_; }

private:
    std::vector<std::int32_t> rows_;
    mutable std::vector<float> records_;
    std::int64_t first_bad_ = -1;
};

}  // namespace

std::int64_t int8_record_words(std::int64_t cols)
{
    HALO_EXPECTS(cols >= 0, "int8 record of ", cols, " columns");
    return int8_record_bytes(cols) / 4;
}

std::int64_t int8_exchange_width(std::int64_t max_width)
{
    HALO_EXPECTS(max_width >= 1, "int8 exchange of rows at most ", max_width, " wide");
    return int8_record_words(max_width);
}

std::vector<std::int32_t> int8_sent_rows(const Shard& shard)
{
    std::vector<std::int32_t> rows = shard.plan.send_rows;
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return rows;
}

Shard int8_record_shard(const Shard& shard)
{
    const auto sent = int8_sent_rows(shard);
    Shard r;
    r.part = shard.part;
    r.num_parts = shard.num_parts;
    r.num_owned = static_cast<std::int64_t>(sent.size());
    r.num_halo = shard.num_halo;
    r.halo_global_ids = shard.halo_global_ids;
    for (auto row : sent) {
        HALO_EXPECTS(row >= 0 && row < shard.num_owned, "send row ", row, " is not one of the ",
                     shard.num_owned, " owned rows");
        if (static_cast<std::size_t>(row) < shard.global_ids.size()) {
            r.global_ids.push_back(shard.global_ids[static_cast<std::size_t>(row)]);
        }
    }
    r.plan = shard.plan;
    // Renumbering by rank in the sorted union keeps each peer's rows strictly ascending.
    for (auto& row : r.plan.send_rows) {
        row = static_cast<std::int32_t>(std::lower_bound(sent.begin(), sent.end(), row) -
                                        sent.begin());
    }
    return r;
}

std::unique_ptr<Int8Codec> make_cpu_int8_codec()
{
    return std::make_unique<CpuInt8Codec>();
}

std::unique_ptr<Int8HaloExchanger> make_int8_exchanger(const InnerExchangerFactory& make_inner,
                                                       std::unique_ptr<Int8Codec> codec,
                                                       const Shard& shard, std::int64_t max_width)
{
    return std::make_unique<Int8Exchanger>(make_inner, std::move(codec), shard, max_width);
}

}  // namespace halo
