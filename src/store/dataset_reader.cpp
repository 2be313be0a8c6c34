#include "dataset_reader.hpp"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "halo/core/error.hpp"
#include "halo/quantize/quantize.hpp"

namespace halo::store {

namespace {

bool is_one_of(const std::string& value, std::initializer_list<std::string_view> allowed)
{
    return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

bool read_flag(hid_t loc, const Where& where, const char* name)
{
    const auto value = read_int_attribute(loc, where, name);
    if (value != 0 && value != 1) {
        HALO_THROW(InputError, where.str(), ": attribute ", name, ": ", value,
                   " is not a flag (0 or 1)");
    }
    return value == 1;
}

std::int64_t read_count(hid_t loc, const Where& where, const char* name)
{
    const auto value = read_int_attribute(loc, where, name);
    if (value < 0) {
        HALO_THROW(InputError, where.str(), ": attribute ", name, ": ", value, " is negative");
    }
    return value;
}

// Parses a member name of /parts: a decimal part id without sign or leading zeros.
bool parse_part_name(const std::string& name, std::int64_t& part)
{
    if (name.empty() || name.size() > 9 || (name.size() > 1 && name[0] == '0') ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return false;
    }
    part = std::stoll(name);
    return true;
}

// Calls a FeatureRows function on a thread of its own, in the order the groups were posted, so
// that the caller's work on them (an upload) overlaps the reader's. finish() waits for the last
// call and rethrows the first exception of one; after one, later groups are dropped. Destroyed
// unfinished (the read failed), it drops what is queued and waits for the call under way.
class RowRelay {
public:
    explicit RowRelay(FeatureRows fn) : fn_(std::move(fn)), thread_([this] { run(); }) {}
    ~RowRelay()
    {
        if (thread_.joinable()) {
            stop(true);
        }
    }
    RowRelay(const RowRelay&) = delete;
    RowRelay& operator=(const RowRelay&) = delete;

    void post(const FeatureRowsRead& group)
    {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            queue_.push_back(group);
        }
        wake_.notify_one();
    }

    void finish()
    {
        stop(false);
        if (error_) {
            std::rethrow_exception(error_);
        }
    }

private:
    void stop(bool drop)
    {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
            if (drop) {
                queue_.clear();
            }
        }
        wake_.notify_one();
        thread_.join();
    }

    void run()
    {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return done_ || !queue_.empty(); });
            if (queue_.empty()) {
                return;
            }
            const auto group = queue_.front();
            queue_.pop_front();
            if (error_) {
                continue;
            }
            lock.unlock();
            try {
                fn_(group);
            } catch (...) {
                error_ = std::current_exception();  // read by finish() after the join
            }
            lock.lock();
        }
    }

    FeatureRows fn_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<FeatureRowsRead> queue_;
    bool done_ = false;
    std::exception_ptr error_;
    std::thread thread_;  // last: starts once the members it uses exist
};

void check_ids(const std::vector<global_id>& ids, const Where& where, std::int64_t num_nodes)
{
    // On every core; the first id out of range (the lowest index) is the one named.
    const auto n = static_cast<std::int64_t>(ids.size());
    std::int64_t first = n;
#pragma omp parallel for schedule(static) reduction(min : first) if (n > (1 << 16))
    for (std::int64_t i = 0; i < n; ++i) {
        if ((ids[i] < 0 || ids[i] >= num_nodes) && i < first) {
            first = i;
        }
    }
    if (first < n) {
        HALO_THROW(InputError, where.str(), "[", first, "] = ", ids[first], " outside [0, ",
                   num_nodes, ") (root attribute num_nodes)");
    }
}

/// The csr group of a part: its encoding and shape checked against num_owned and num_halo,
/// indptr, indices and the values (present exactly when the root attribute has_values says).
void read_shard_csr(hid_t g, const Where& where, const DatasetInfo& info, std::int64_t nnz,
                    Shard& shard)
{
    const auto csr = open_group(g, where, "csr");
    const auto cw = where.child("csr");
    const auto c = csr.get();
    const auto encoding = read_string_attribute(c, cw, "encoding-type");
    if (encoding != "csr_matrix") {
        HALO_THROW(InputError, cw.str(), ": attribute encoding-type is '", encoding,
                   "', expected 'csr_matrix'");
    }
    const auto shape = read_int_array_attribute(c, cw, "shape", 2);
    const std::array<std::int64_t, 2> expected{shard.num_owned,
                                               shard.num_owned + shard.num_halo};
    if (shape[0] != expected[0] || shape[1] != expected[1]) {
        HALO_THROW(InputError, cw.str(), ": attribute shape is [", shape[0], ", ", shape[1],
                   "], expected [num_owned, num_owned + num_halo] = [", expected[0], ", ",
                   expected[1], "]");
    }
    shard.csr.num_rows = expected[0];
    shard.csr.num_cols = expected[1];
    shard.csr.indptr = read_array<offset_t>(
        c, cw, "indptr", {shard.num_owned + 1, "attribute num_owned + 1"});
    shard.csr.indices = read_array<local_id>(c, cw, "indices", {nnz, "attribute nnz"});
    const bool has_values = has_link(c, cw, "values");
    if (has_values) {
        if (!info.has_values) {
            HALO_THROW(InputError, cw.child("values").str(),
                       ": present although the root attribute has_values is 0");
        }
        shard.csr.values = read_array<float>(c, cw, "values", {nnz, "attribute nnz"});
    } else if (info.has_values && nnz > 0) {
        HALO_THROW(InputError, cw.child("values").str(),
                   ": missing dataset (the root attribute has_values is 1)");
    }
    if (has_link(c, cw, "data") && (!has_values || !same_object(c, cw, "data", "values"))) {
        HALO_THROW(
            InputError, cw.child("data").str(),
            ": is not a hard link to csr/values (the AnnData name of the values must "
            "be the same dataset)");
    }
}

/// The halo group of a part: the halo's global ids and the halo plan.
void read_shard_halo(hid_t g, const Where& where, const DatasetInfo& info, Shard& shard)
{
    const auto halo = open_group(g, where, "halo");
    const auto hw = where.child("halo");
    const auto h = halo.get();
    shard.halo_global_ids =
        read_array<global_id>(h, hw, "global_ids", {shard.num_halo, "attribute num_halo"});
    check_ids(shard.halo_global_ids, hw.child("global_ids"), info.num_nodes);
    auto& plan = shard.plan;
    const Length peers{info.num_parts - 1, "num_parts - 1 peers", false};
    plan.recv_ranks = read_array<std::int32_t>(h, hw, "recv_ranks", peers);
    plan.recv_offsets =
        read_array<std::int64_t>(h, hw, "recv_offsets",
                                 {static_cast<std::int64_t>(plan.recv_ranks.size()) + 1,
                                  "length of recv_ranks + 1"});
    plan.send_ranks = read_array<std::int32_t>(h, hw, "send_ranks", peers);
    plan.send_offsets =
        read_array<std::int64_t>(h, hw, "send_offsets",
                                 {static_cast<std::int64_t>(plan.send_ranks.size()) + 1,
                                  "length of send_ranks + 1"});
    plan.send_rows = read_array<std::int32_t>(
        h, hw, "send_rows", {plan.send_offsets.back(), "last entry of send_offsets"});
}

}  // namespace

DatasetReader::DatasetReader(const std::filesystem::path& path)
    : file_(path.string()), handle_(open_file_read_only(file_))
{
    const Where root{file_, "/"};
    const auto h = handle_.get();
    if (!has_attribute(h, root, "format")) {
        HALO_THROW(InputError, file_,
                   ": not a halo dataset (the root group has no attribute 'format'; an "
                   "interrupted write leaves none either)");
    }
    info_.format = read_string_attribute(h, root, "format");
    if (info_.format != dataset_format_name) {
        HALO_THROW(InputError, file_, ": not a halo dataset (root attribute format is '",
                   info_.format, "', expected '", dataset_format_name, "')");
    }
    const auto version = read_int_attribute(h, root, "version");
    if (version > dataset_format_version) {
        HALO_THROW(InputError, file_, ": format version ", version,
                   " is newer than this build of HaloGNN reads (version ", dataset_format_version,
                   "); read it with a newer HaloGNN or write it again with this one");
    }
    if (version < 1) {
        HALO_THROW(InputError, file_, ": root attribute version is ", version,
                   ", not a valid format version (1 .. ", dataset_format_version, ")");
    }
    info_.version = static_cast<int>(version);

    info_.num_nodes = read_count(h, root, "num_nodes");
    info_.num_nonzeros = read_count(h, root, "num_nonzeros");
    const auto num_parts = read_int_attribute(h, root, "num_parts");
    if (num_parts < 1 || num_parts > std::numeric_limits<std::int32_t>::max()) {
        HALO_THROW(InputError, root.str(), ": attribute num_parts: ", num_parts,
                   " is not a part count (at least 1)");
    }
    info_.num_parts = static_cast<std::int32_t>(num_parts);
    info_.feature_dim = read_count(h, root, "feature_dim");
    if (info_.version >= 2) {
        info_.feature_type = read_string_attribute(h, root, "feature_type");
        if (!is_one_of(info_.feature_type, {"float32", "int8", "float16", "bfloat16"})) {
            HALO_THROW(InputError, root.str(), ": attribute feature_type: '", info_.feature_type,
                       "' is not float32, float16, bfloat16 or int8");
        }
    }
    info_.has_labels = read_flag(h, root, "has_labels");
    info_.has_values = read_flag(h, root, "has_values");
    info_.partitioner = read_string_attribute(h, root, "partitioner");
    info_.normalization = read_string_attribute(h, root, "normalization");
    if (!is_one_of(info_.normalization, {"none", "gcn", "mean"})) {
        HALO_THROW(InputError, root.str(), ": attribute normalization: '", info_.normalization,
                   "' is not none, gcn or mean");
    }
    info_.self_loops = read_string_attribute(h, root, "self_loops");
    if (!is_one_of(info_.self_loops, {"keep", "drop", "add"})) {
        HALO_THROW(InputError, root.str(), ": attribute self_loops: '", info_.self_loops,
                   "' is not keep, drop or add");
    }
    info_.created_by = read_string_attribute(h, root, "created_by");
    // Absent in files written before locality orders: rows in global order.
    if (has_attribute(h, root, "row_order")) {
        info_.row_order = read_string_attribute(h, root, "row_order");
        if (!is_one_of(info_.row_order, {"global", "rcm", "rabbit"})) {
            HALO_THROW(InputError, root.str(), ": attribute row_order: '", info_.row_order,
                       "' is not global, rcm or rabbit");
        }
    }

    // /parts must hold exactly the groups "0" .. "num_parts - 1": a reader trusts num_parts to
    // size its communicator, and a stray or missing part would surface only on some rank.
    const auto parts = open_group(h, root, "parts");
    const auto parts_where = root.child("parts");
    const auto names = link_names(parts.get(), parts_where);
    for (const auto& name : names) {
        std::int64_t p = -1;
        if (!parse_part_name(name, p) || p >= info_.num_parts) {
            HALO_THROW(InputError, parts_where.str(), ": unexpected member '", name,
                       "' (parts are named 0 .. ", info_.num_parts - 1,
                       " after the root attribute num_parts = ", info_.num_parts, ")");
        }
    }
    if (static_cast<std::int64_t>(names.size()) != info_.num_parts) {
        HALO_THROW(InputError, parts_where.str(), ": holds ", names.size(),
                   " parts but the root attribute num_parts is ", info_.num_parts);
    }
}

std::vector<std::int32_t> DatasetReader::owner() const
{
    const Where root{file_, "/"};
    const auto group = open_group(handle_.get(), root, "partition");
    const auto where = root.child("partition");
    auto owner = read_array<std::int32_t>(group.get(), where, "owner",
                                          {info_.num_nodes, "root attribute num_nodes"});
    for (std::size_t v = 0; v < owner.size(); ++v) {
        if (owner[v] < 0 || owner[v] >= info_.num_parts) {
            HALO_THROW(InputError, where.child("owner").str(), "[", v, "] = ", owner[v],
                       " outside [0, ", info_.num_parts, ") (root attribute num_parts)");
        }
    }
    return owner;
}

Shard DatasetReader::part(int part, const ShardReadOptions& options) const
{
    if (part < 0 || part >= info_.num_parts) {
        HALO_THROW(InputError, file_, ": part ", part, " does not exist (the dataset has ",
                   info_.num_parts, " parts)");
    }
    const Where root{file_, "/"};
    const auto parts = open_group(handle_.get(), root, "parts");
    const auto name = std::to_string(part);
    const auto group = open_group(parts.get(), root.child("parts"), name.c_str());
    const auto where = root.child("parts").child(name);
    const auto g = group.get();

    Shard shard;
    shard.part = part;
    shard.rows_in_global_order = info_.row_order == "global";
    shard.num_parts = info_.num_parts;
    shard.num_owned = read_count(g, where, "num_owned");
    shard.num_halo = read_count(g, where, "num_halo");
    shard.num_interior = read_count(g, where, "num_interior");
    const auto nnz = read_count(g, where, "nnz");
    // Compared side by side: their sum may overflow int64 in a corrupt file (fuzz_dataset).
    constexpr std::int64_t id_max = std::numeric_limits<local_id>::max();
    if (shard.num_owned > id_max || shard.num_halo > id_max - shard.num_owned) {
        HALO_THROW(InputError, where.str(), ": num_owned ", shard.num_owned, " + num_halo ",
                   shard.num_halo, " exceeds the int32 local id range");
    }
    if (shard.num_interior > shard.num_owned) {
        HALO_THROW(InputError, where.str(), ": num_interior = ", shard.num_interior,
                   " exceeds num_owned = ", shard.num_owned);
    }

    // The graph: ids, csr and halo plan.
    auto read_graph = [&] {
        shard.global_ids =
            read_array<global_id>(g, where, "global_ids", {shard.num_owned, "attribute num_owned"});
        check_ids(shard.global_ids, where.child("global_ids"), info_.num_nodes);
        read_shard_csr(g, where, info_, nnz, shard);
        read_shard_halo(g, where, info_, shard);
    };
    // With a features reader, the features come first, each group handed to it on the relay's
    // thread while the graph is read.
    std::optional<RowRelay> relay;
    RowsRead on_features;
    if (options.features) {
        relay.emplace(options.features);
        on_features = [&relay, &shard, this](std::uint64_t first, std::uint64_t count,
                                             const void* rows) {
            relay->post({static_cast<std::int64_t>(first), static_cast<std::int64_t>(count),
                         shard.num_owned, info_.feature_dim, info_.feature_type == "int8", rows});
        };
    } else {
        read_graph();
    }

    if (info_.feature_dim > 0 && info_.feature_type == "int8") {
        const auto features = open_group(g, where, "features");
        const auto fw = where.child("features");
        shard.feature_dim = info_.feature_dim;
        QuantizedMatrix q;
        q.rows = shard.num_owned;
        q.cols = info_.feature_dim;
        q.data = read_matrix<std::int8_t>(
            features.get(), fw, "values", shard.num_owned, info_.feature_dim,
            "attribute num_owned x root attribute feature_dim", on_features);
        q.scale = read_array<float>(features.get(), fw, "scale",
                                    {info_.feature_dim, "root attribute feature_dim"});
        q.zero_point = read_array<std::int32_t>(features.get(), fw, "zero_point",
                                                {info_.feature_dim, "root attribute feature_dim"});
        validate(q, fw.str().c_str());
        shard.features.resize(static_cast<std::size_t>(q.rows * q.cols));
        dequantize(q.view(), dense_view(shard.features.data(), q.rows, q.cols));
        shard.features_int8 = std::move(q.data);
        shard.feature_scale = std::move(q.scale);
        shard.feature_zero_point = std::move(q.zero_point);
    } else if (const auto type16 = feature_type_from_stored_name(info_.feature_type);
               info_.feature_dim > 0 && type16 && *type16 != FeatureType::fp32) {
        // fp16 / bf16: each group widened exactly as it arrives, into the float32 array that
        // options.features is then told of, as for a float32 dataset.
        const auto features = open_group(g, where, "features");
        shard.feature_dim = info_.feature_dim;
        const auto cols = static_cast<std::size_t>(info_.feature_dim);
        const RowsRead widen = [&](std::uint64_t first, std::uint64_t count, const void* rows) {
            // Allocated at the first group, once the dataset's type and shape are checked.
            if (shard.features.empty()) {
                shard.features =
                    resident_vector<float>(static_cast<std::size_t>(shard.num_owned) * cols);
            }
            const std::span<float> out(shard.features.data() + first * cols, count * cols);
            decode_features({static_cast<const std::uint16_t*>(rows), count * cols}, *type16,
                            out);
            if (on_features) {
                on_features(first, count, out.data());
            }
        };
        read_matrix16(features.get(), where.child("features"), "values", *type16,
                      shard.num_owned, info_.feature_dim,
                      "attribute num_owned x root attribute feature_dim", widen);
    } else if (info_.feature_dim > 0) {
        const auto features = open_group(g, where, "features");
        shard.feature_dim = info_.feature_dim;
        shard.features = read_matrix<float>(
            features.get(), where.child("features"), "values", shard.num_owned, info_.feature_dim,
            "attribute num_owned x root attribute feature_dim", on_features);
    } else if (has_link(g, where, "features")) {
        HALO_THROW(InputError, where.child("features").str(),
                   ": present although the root attribute feature_dim is 0");
    }

    if (relay) {
        read_graph();
    }

    if (info_.has_labels) {
        shard.labels =
            read_array<std::int32_t>(g, where, "labels", {shard.num_owned, "attribute num_owned"});
    } else if (has_link(g, where, "labels")) {
        HALO_THROW(InputError, where.child("labels").str(),
                   ": present although the root attribute has_labels is 0");
    }

    if (relay) {
        relay->finish();
    }
    validate_shard(shard, where.str());
    return shard;
}

}  // namespace halo::store

namespace halo {

DatasetInfo read_dataset_info(const std::filesystem::path& path)
{
    const store::QuietErrors quiet;
    return store::DatasetReader(path).info();
}

std::vector<std::int32_t> read_owner(const std::filesystem::path& path)
{
    const store::QuietErrors quiet;
    return store::DatasetReader(path).owner();
}

Shard read_shard(const std::filesystem::path& path, int part)
{
    return read_shard(path, part, {});
}

Shard read_shard(const std::filesystem::path& path, int part, const ShardReadOptions& options)
{
    const store::QuietErrors quiet;
    return store::DatasetReader(path).part(part, options);
}

}  // namespace halo
