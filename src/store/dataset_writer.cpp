#include <optional>

#include "dataset_ledger.hpp"
#include "halo/core/error.hpp"
#include "halo/core/feature_type.hpp"
#include "halo/quantize/quantize.hpp"
#include "halo/store/store.hpp"
#include "hdf5_util.hpp"
#include "kernel_metadata_io.hpp"

#ifndef HALO_VERSION_STRING
#define HALO_VERSION_STRING "unknown"
#endif

namespace halo {

namespace {

template <typename T>
std::span<const T> span_of(const std::vector<T>& v)
{
    return {v.data(), v.size()};
}

}  // namespace

struct DatasetWriter::Impl {
    std::string file;  // the target's name, which errors show
    DatasetInfo info;
    std::vector<std::int32_t> owner;
    std::optional<store::DatasetLedger> ledger;  // refers to `owner`
    std::optional<store::AtomicH5File> out;
    store::Handle parts;
    std::vector<bool> written;
    std::vector<bool> expected;      // the parts this file must hold (all but in a part file)
    bool part_file = false;          // holds some parts of a joined dataset (docs/FORMAT.md)
    bool linked = false;             // some part is an external link into a part file
    std::optional<bool> has_values;  // decided by the first part with a nonzero
    bool committed = false;
    bool broken = false;  // a write failed half-way: the file is unusable
    std::vector<float> int8_scale;  // int8 datasets: the first part's column parameters
    std::vector<std::int32_t> int8_zero_point;

    ~Impl()
    {
        const store::QuietErrors quiet;
        parts.reset();  // before the file, which removes itself when uncommitted
    }
};

DatasetWriter::DatasetWriter(const std::filesystem::path& path, const DatasetInfo& info,
                             const std::vector<std::int32_t>& owner)
    : DatasetWriter(path, info, owner, {})
{
}

DatasetWriter::DatasetWriter(const std::filesystem::path& path, const DatasetInfo& info,
                             const std::vector<std::int32_t>& owner,
                             const std::vector<int>& part_file_parts)
    : impl_(std::make_unique<Impl>())
{
    const store::QuietErrors quiet;
    auto& w = *impl_;
    w.file = path.string();
    w.info = info;
    const auto& f = w.file;
    HALO_EXPECTS(info.num_parts >= 1, f, ": num_parts is ", info.num_parts);
    HALO_EXPECTS(static_cast<std::int64_t>(owner.size()) == info.num_nodes, f, ": owner has ",
                 owner.size(), " entries for num_nodes = ", info.num_nodes);
    HALO_EXPECTS(info.num_nonzeros >= 0 && info.feature_dim >= 0, f, ": num_nonzeros ",
                 info.num_nonzeros, ", feature_dim ", info.feature_dim);
    for (std::size_t v = 0; v < owner.size(); ++v) {
        HALO_EXPECTS(owner[v] >= 0 && owner[v] < info.num_parts, f, ": owner[", v, "] = ", owner[v],
                     " outside [0, ", info.num_parts, ")");
    }
    HALO_EXPECTS(
        info.normalization == "none" || info.normalization == "gcn" || info.normalization == "mean",
        f, ": normalization '", info.normalization, "'");
    HALO_EXPECTS(info.self_loops == "keep" || info.self_loops == "drop" || info.self_loops == "add",
                 f, ": self_loops '", info.self_loops, "'");
    w.owner = owner;
    w.ledger.emplace(w.owner, info.num_parts);
    w.written.assign(static_cast<std::size_t>(info.num_parts), false);
    w.part_file = !part_file_parts.empty();
    w.expected.assign(static_cast<std::size_t>(info.num_parts), !w.part_file);
    for (const auto p : part_file_parts) {
        HALO_EXPECTS(p >= 0 && p < info.num_parts, f, ": part ", p, " outside [0, ", info.num_parts,
                     ")");
        w.expected[static_cast<std::size_t>(p)] = true;
    }

    w.out.emplace(path);

    // "format" is written last, by commit(): until then the file is not a halo dataset to any
    // reader, even if the temporary file survives a crash.
    const store::Where root{f, "/"};
    const auto h = w.out->get();
    store::write_attribute<std::int32_t>(h, root, "version", dataset_format_version);
    store::write_attribute<std::int64_t>(h, root, "num_nodes", info.num_nodes);
    store::write_attribute<std::int64_t>(h, root, "num_nonzeros", info.num_nonzeros);
    store::write_attribute<std::int32_t>(h, root, "num_parts", info.num_parts);
    store::write_attribute_string(h, root, "partitioner", info.partitioner);
    store::write_attribute_string(h, root, "normalization", info.normalization);
    store::write_attribute_string(h, root, "self_loops", info.self_loops);
    store::write_attribute<std::int64_t>(h, root, "feature_dim", info.feature_dim);
    HALO_EXPECTS(info.feature_type == "int8" || feature_type_from_stored_name(info.feature_type),
                 f, ": feature_type '", info.feature_type, "'");
    store::write_attribute_string(h, root, "feature_type", info.feature_type);
    HALO_EXPECTS(
        info.row_order == "global" || info.row_order == "rcm" || info.row_order == "rabbit", f,
        ": row_order '", info.row_order, "'");
    store::write_attribute_string(h, root, "row_order", info.row_order);
    store::write_attribute<std::int8_t>(h, root, "has_labels", info.has_labels ? 1 : 0);
    store::write_attribute_string(
        h, root, "created_by",
        info.created_by.empty() ? std::string("HaloGNN ") + HALO_VERSION_STRING : info.created_by);

    if (!w.part_file) {
        const auto partition = store::create_group(h, root, "partition");
        store::write_array<std::int32_t>(partition.get(), root.child("partition"), "owner",
                                         span_of(w.owner));
    }
    w.parts = store::create_group(h, root, "parts");
}

DatasetWriter::~DatasetWriter() = default;

void DatasetWriter::write_part(const Shard& shard)
{
    const store::QuietErrors quiet;
    auto& w = *impl_;
    const auto& f = w.file;
    const auto p = shard.part;
    HALO_EXPECTS(!w.committed && !w.broken, f, ": write_part after ",
                 w.committed ? "commit" : "a failed write");
    HALO_EXPECTS(p >= 0 && p < w.info.num_parts, f, ": part ", p, " outside [0, ", w.info.num_parts,
                 ")");
    HALO_EXPECTS(!w.written[static_cast<std::size_t>(p)], f, ": part ", p, " written twice");
    HALO_EXPECTS(w.expected[static_cast<std::size_t>(p)], f, ": part ", p,
                 " does not belong in this part file");
    HALO_EXPECTS(shard.num_parts == w.info.num_parts, f, ": part ", p, " has num_parts ",
                 shard.num_parts, ", the dataset ", w.info.num_parts);
    HALO_EXPECTS(shard.feature_dim == w.info.feature_dim, f, ": part ", p, " has feature_dim ",
                 shard.feature_dim, ", the dataset ", w.info.feature_dim);
    HALO_EXPECTS(shard.labels.empty() != w.info.has_labels, f, ": part ", p,
                 shard.labels.empty() ? " has no labels but has_labels is set"
                                      : " has labels but has_labels is not set");
    const std::string where = f + ": /parts/" + std::to_string(p);
    HALO_EXPECTS(shard.rows_in_global_order == (w.info.row_order == "global"), where,
                 shard.rows_in_global_order ? ": rows in global order" : ": rows in a locality order",
                 " in a dataset whose row_order is ", w.info.row_order);
    validate_shard(shard, where);
    if (w.info.feature_type == "int8" && shard.feature_dim > 0) {
        // Int8 parts share their columns' parameters, so that a row means the same on every
        // rank (and a halo row can be sent as int8 and dequantized by its receiver).
        QuantizedMatrix q;
        q.rows = shard.num_owned;
        q.cols = shard.feature_dim;
        q.data = shard.features_int8;
        q.scale = shard.feature_scale;
        q.zero_point = shard.feature_zero_point;
        validate(q, where.c_str());
        if (w.int8_scale.empty()) {
            w.int8_scale = shard.feature_scale;
            w.int8_zero_point = shard.feature_zero_point;
        }
        HALO_EXPECTS(shard.feature_scale == w.int8_scale &&
                         shard.feature_zero_point == w.int8_zero_point,
                     where, ": int8 feature scales or zero points differ from the first part's");
    }
    // fp16 / bf16: encoded before anything of the part is written, so that a value beyond the
    // type's range fails the part cleanly.
    const auto type16 = feature_type_from_stored_name(w.info.feature_type);
    const bool store16 = shard.feature_dim > 0 && type16 && *type16 != FeatureType::fp32;
    std::vector<std::uint16_t> features16;
    if (store16) {
        features16.resize(shard.features.size());
        const auto bad = encode_features(span_of(shard.features), *type16, features16);
        if (bad >= 0) {
            const auto row = bad / shard.feature_dim;
            HALO_THROW(InputError, where, ": feature ",
                       shard.features[static_cast<std::size_t>(bad)], " of node ",
                       shard.global_ids[static_cast<std::size_t>(row)], " (column ",
                       bad % shard.feature_dim, ") is beyond ", to_string(*type16),
                       "'s range and would be stored as infinity",
                       *type16 == FeatureType::fp16 ? " (fp16's largest is 65504; bf16 has fp32's range)"
                                                    : "");
        }
    }
    const auto nnz = shard.csr.nnz();
    if (nnz > 0) {
        if (!w.has_values) {
            w.has_values = shard.csr.has_values();
        }
        HALO_EXPECTS(*w.has_values == shard.csr.has_values(), f, ": part ", p,
                     shard.csr.has_values() ? " has values but earlier parts are patterns"
                                            : " is a pattern but earlier parts have values");
    }

    // From here on a failure leaves a half-written part: the writer refuses further use.
    w.broken = true;
    w.ledger->add(shard, where);

    const auto name = std::to_string(p);
    const store::Where parts_where{f, "/parts"};
    const store::Where pw = parts_where.child(name);
    const auto group = store::create_group(w.parts.get(), parts_where, name.c_str());
    const auto g = group.get();
    store::write_attribute<std::int64_t>(g, pw, "num_owned", shard.num_owned);
    store::write_attribute<std::int64_t>(g, pw, "num_halo", shard.num_halo);
    store::write_attribute<std::int64_t>(g, pw, "num_interior", shard.num_interior);
    store::write_attribute<std::int64_t>(g, pw, "nnz", nnz);
    store::write_array(g, pw, "global_ids", span_of(shard.global_ids));
    {
        const auto csr = store::create_group(g, pw, "csr");
        const auto cw = pw.child("csr");
        const auto c = csr.get();
        store::write_attribute_string(c, cw, "encoding-type", "csr_matrix");
        store::write_attribute_string(c, cw, "encoding-version", "0.1.0");
        const std::int64_t shape[2] = {shard.csr.num_rows, shard.csr.num_cols};
        store::write_attribute_array(c, cw, "shape", shape);
        store::write_array(c, cw, "indptr", span_of(shard.csr.indptr));
        store::write_array(c, cw, "indices", span_of(shard.csr.indices));
        if (shard.csr.has_values()) {
            store::write_array(c, cw, "values", span_of(shard.csr.values));
            // AnnData's name for the values: a second hard link, not a copy.
            HALO_HDF5_TRY(H5Lcreate_hard(c, "values", c, "data", H5P_DEFAULT, H5P_DEFAULT),
                          cw.child("data").str());
        }
    }
    {
        const auto halo = store::create_group(g, pw, "halo");
        const auto hw = pw.child("halo");
        const auto h = halo.get();
        const auto& plan = shard.plan;
        store::write_array(h, hw, "global_ids", span_of(shard.halo_global_ids));
        store::write_array(h, hw, "recv_ranks", span_of(plan.recv_ranks));
        store::write_array(h, hw, "recv_offsets", span_of(plan.recv_offsets));
        store::write_array(h, hw, "send_ranks", span_of(plan.send_ranks));
        store::write_array(h, hw, "send_offsets", span_of(plan.send_offsets));
        store::write_array(h, hw, "send_rows", span_of(plan.send_rows));
    }
    if (shard.feature_dim > 0 && w.info.feature_type == "int8") {
        const auto features = store::create_group(g, pw, "features");
        const auto fw = pw.child("features");
        store::write_matrix(features.get(), fw, "values", span_of(shard.features_int8),
                            shard.num_owned, shard.feature_dim);
        store::write_array(features.get(), fw, "scale", span_of(shard.feature_scale));
        store::write_array(features.get(), fw, "zero_point", span_of(shard.feature_zero_point));
    } else if (store16) {
        const auto features = store::create_group(g, pw, "features");
        store::write_matrix16(features.get(), pw.child("features"), "values", *type16,
                              span_of(features16), shard.num_owned, shard.feature_dim);
    } else if (shard.feature_dim > 0) {
        const auto features = store::create_group(g, pw, "features");
        store::write_matrix(features.get(), pw.child("features"), "values", span_of(shard.features),
                            shard.num_owned, shard.feature_dim);
    }
    if (!shard.labels.empty()) {
        store::write_array(g, pw, "labels", span_of(shard.labels));
    }
    w.written[static_cast<std::size_t>(p)] = true;
    w.broken = false;
}

void DatasetWriter::link_part(int part, const std::filesystem::path& part_file)
{
    const store::QuietErrors quiet;
    auto& w = *impl_;
    const auto& f = w.file;
    HALO_EXPECTS(!w.committed && !w.broken && !w.part_file, f, ": link_part after ",
                 w.committed ? "commit" : "a failed write", " or in a part file");
    HALO_EXPECTS(part >= 0 && part < w.info.num_parts, f, ": part ", part, " outside [0, ",
                 w.info.num_parts, ")");
    HALO_EXPECTS(!w.written[static_cast<std::size_t>(part)], f, ": part ", part, " written twice");
    const auto name = std::to_string(part);
    const auto target = "/parts/" + name;
    HALO_HDF5_TRY(H5Lcreate_external(part_file.string().c_str(), target.c_str(), w.parts.get(),
                                     name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                  f + ": /parts/" + name + " -> " + part_file.string() + ":" + target);
    w.written[static_cast<std::size_t>(part)] = true;
    w.linked = true;
}

void DatasetWriter::write_kernel_metadata(int part, const KernelMetadata& metadata)
{
    const store::QuietErrors quiet;
    auto& w = *impl_;
    const auto& f = w.file;
    HALO_EXPECTS(!w.committed && !w.broken, f, ": write_kernel_metadata after ",
                 w.committed ? "commit" : "a failed write");
    HALO_EXPECTS(part >= 0 && part < w.info.num_parts && w.written[static_cast<std::size_t>(part)],
                 f, ": kernel metadata for part ", part, ", which is not written yet");
    const auto name = std::to_string(part);
    const store::Where parts_where{f, "/parts"};
    const auto group = store::open_group(w.parts.get(), parts_where, name.c_str());
    w.broken = true;
    store::write_kernel_metadata_group(group.get(), parts_where.child(name), metadata);
    w.broken = false;
}

void DatasetWriter::commit()
{
    const store::QuietErrors quiet;
    auto& w = *impl_;
    const auto& f = w.file;
    HALO_EXPECTS(!w.committed && !w.broken, f, ": commit after ",
                 w.committed ? "commit" : "a failed write");
    std::string missing;
    for (std::size_t p = 0; p < w.written.size(); ++p) {
        if (w.expected[p] && !w.written[p]) {
            missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        }
    }
    HALO_EXPECTS(missing.empty(), f, ": commit with part(s) ", missing, " not written");
    // A part file holds some parts and a joined root none: the cross-part checks are the
    // distributed builder's (and check_dataset's on the joined file).
    if (!w.part_file && !w.linked) {
        w.ledger->finish(w.info.num_nonzeros, f);
    }

    const store::Where root{f, "/"};
    const auto h = w.out->get();
    store::write_attribute<std::int8_t>(
        h, root, "has_values", w.linked ? w.info.has_values : w.has_values.value_or(false));
    store::write_attribute_string(h, root, "format",
                                  w.part_file ? dataset_parts_format_name : dataset_format_name);
    w.parts.reset();
    w.out->commit();
    w.committed = true;
}

void write_dataset(const std::filesystem::path& path, const DatasetInfo& info,
                   const std::vector<std::int32_t>& owner, const std::vector<Shard>& shards)
{
    DatasetWriter writer(path, info, owner);
    for (const auto& shard : shards) {
        writer.write_part(shard);
    }
    writer.commit();
}

}  // namespace halo
