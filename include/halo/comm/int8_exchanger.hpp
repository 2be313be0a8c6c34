// Int8 halo exchange (`halo-infer --exchange int8`): the rows a rank sends travel as
// int8 records with their own scale and zero point (halo/quantize/quantize.hpp, "Rows with their
// own parameters") instead of fp32 rows, about a quarter of the bytes. Every received value is
// within half its sending row's scale of the fp32 exchange's (round to nearest).
//
// A decorator, so that every transport (MPI on host buffers, MPI on device buffers, NCCL) gets
// it: the int8 exchanger quantizes, an inner exchanger moves the records as rows of float-sized
// words, the int8 exchanger dequantizes. The records are compact: record k holds the k-th owned row
// any peer needs (the union of the plan's send rows, ascending), the received records follow, so
// quantizing is one pass over exactly the rows sent. The inner exchanger therefore runs on a
// record shard (int8_record_shard: the same peers, blocks and global ids, send rows renumbered
// into the union), which is why make_int8_exchanger builds it from a factory rather than taking
// one built on the feature shard.
//
// A row holding a NaN or an infinity cannot be quantized (its range is undefined; any choice
// would hand the neighbours plausible garbage). The exchange still completes on every rank, so
// no peer is left waiting (such a row arrives as NaN: its scale is NaN), and then finish() throws
// halo::InputError on the sending rank, naming the rank, the local row and its global id.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "halo/core/dense.hpp"
#include "halo/core/exchanger.hpp"
#include "halo/core/shard.hpp"

namespace halo {

/// Words (4 bytes, exchanged as floats) of the int8 record of a row of `cols` values:
/// int8_record_bytes(cols) / 4.
std::int64_t int8_record_words(std::int64_t cols);

/// The width, in floats, the inner exchanger must accept for rows of up to `max_width` values:
/// int8_record_words(max_width). Throws halo::LogicError when max_width < 1.
std::int64_t int8_exchange_width(std::int64_t max_width);

/// The shard the inner exchanger runs on: same part, peers, receive blocks and halo global ids;
/// its owned rows are the union of `shard`'s send rows (ascending local id, global_ids to match,
/// so check_halo_plan gives the same verdict on either) and its send rows index that union. No
/// CSR, features or labels. The union is `int8_sent_rows(shard)`.
Shard int8_record_shard(const Shard& shard);

/// The owned rows any peer needs: the sorted, duplicate-free union of shard.plan.send_rows.
std::vector<std::int32_t> int8_sent_rows(const Shard& shard);

/// Quantization and dequantization of records in one backend's memory (CPU: host; CUDA: the
/// Context's device, on its compute stream). The int8 exchanger calls prepare() once, then per
/// exchange pack() before the inner start() and unpack() after the inner finish().
class Int8Codec {
public:
    virtual ~Int8Codec() = default;

    /// Once: keeps `rows` (the owned rows to quantize, uploaded once where the backend needs
    /// it) and allocates the records, `record_rows` x `max_record_words` words, or takes
    /// `memory` for them where given (device codecs: the inner exchanger's own memory,
    /// HaloExchanger::allocate, at least that many floats; host codecs take none).
    virtual void prepare(const std::vector<std::int32_t>& rows, std::int64_t record_rows,
                         std::int64_t max_record_words,
                         std::shared_ptr<float> memory = nullptr) = 0;

    /// The records (backend memory), contiguous records of the width of the current exchange.
    virtual float* records() const noexcept = 0;

    /// Record k (int8_record_words(x.cols) words each) = row rows[k] of x quantized, for every k.
    /// Reads x only. The CUDA codec is asynchronous (compute stream).
    virtual void pack(DenseView<const float> x) = 0;

    /// Rows [0, y.rows) of y = records [first, first + y.rows) dequantized (records of
    /// int8_record_words(y.cols) words). The CUDA codec is asynchronous (compute stream).
    virtual void unpack(std::int64_t first, DenseView<float> y) = 0;

    /// The index k of the first row of the last pack() that held a NaN or an infinity, or -1.
    /// The CUDA codec waits on the host for that pack (not for later work): see its factory.
    virtual std::int64_t first_non_finite() = 0;
};

/// The CPU codec: the reference packing of halo/quantize/quantize.hpp on host memory.
std::unique_ptr<Int8Codec> make_cpu_int8_codec();

/// Builds the inner exchanger for the record shard and its width in floats (both supplied by
/// make_int8_exchanger), e.g.
///   [&](const Shard& s, std::int64_t w) { return make_nccl_exchanger(ctx, nccl, s, w); }
/// The record shard outlives the exchanger built from it.
using InnerExchangerFactory =
    std::function<std::unique_ptr<HaloExchanger>(const Shard& record_shard, std::int64_t width)>;

/// The int8 exchanger: a HaloExchanger whose stats() are the inner exchanger's (the bytes that
/// actually moved: int8 records), plus what the same exchanges would have moved as fp32 rows.
class Int8HaloExchanger : public HaloExchanger {
public:
    /// Bytes the exchanges so far would have sent / received as fp32 rows (rows x cols x 4).
    virtual std::int64_t fp32_bytes_sent() const = 0;
    virtual std::int64_t fp32_bytes_received() const = 0;
};

/// An int8 exchanger for `shard` (this rank's part) and rows of up to `max_width` values
/// (>= 1). start(x), x of 1 to max_width columns, quantizes the sent rows of x through `codec`
/// into its records and starts the inner exchange of them; finish() completes it and dequantizes
/// the received records into x's halo rows. x's owned rows are only read, never written; the
/// contract on x is HaloExchanger's, in the codec's memory (device matrices for the CUDA codec).
/// Throws halo::LogicError for a null codec or factory result or max_width < 1, and
/// halo::InputError from finish() for a sent row that is not finite (see the top of this header).
std::unique_ptr<Int8HaloExchanger> make_int8_exchanger(const InnerExchangerFactory& make_inner,
                                                       std::unique_ptr<Int8Codec> codec,
                                                       const Shard& shard, std::int64_t max_width);

namespace cuda {

class Context;

/// The CUDA codec (built only with HALO_ENABLE_CUDA): the kernels of halo/comm/quantized_pack.hpp
/// on ctx's compute stream. Device exchangers order their transfers after the compute stream's
/// earlier work in start() and make it wait for them in finish(), so packing before the inner
/// start() and unpacking after the inner finish() needs no further synchronization.
/// first_non_finite() copies the sent rows' scales to pinned host memory right after the pack
/// (asynchronously) and waits for that copy on the host: finish() thereby waits for the compute
/// stream's work issued up to start() (normally long done by then), never for the exchange or
/// for work issued after start(). ctx must outlive the codec.
std::unique_ptr<Int8Codec> make_int8_codec(Context& ctx);

}  // namespace cuda

}  // namespace halo
