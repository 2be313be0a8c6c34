// The CPU backend's MaxK and attention plans (halo/kernels_host/backend.hpp) over the reference
// kernels, and the Backend defaults for backends without them.
#include "cpu_plans.hpp"

#include <cstring>
#include <new>
#include <optional>
#include <vector>

#include "halo/core/detail/argmax.hpp"
#include "halo/core/detail/counter_random.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels_host/aes.hpp"
#include "halo/kernels_host/attention.hpp"
#include "halo/kernels_host/maxk.hpp"

namespace halo {

void Backend::fill_random_features(const global_id* ids, std::uint64_t seed, DenseView<float> dst)
{
    HALO_EXPECTS(dst.rows == 0 || ids != nullptr, "fill_random_features: no ids for ", dst.rows,
                 " rows");
    std::vector<float> host(static_cast<std::size_t>(dst.rows * dst.cols));
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < dst.rows; ++r) {
        for (std::int64_t j = 0; j < dst.cols; ++j) {
            host[r * dst.cols + j] = detail::random_feature(seed, ids[r], dst.cols, j);
        }
    }
    if (dst.ld == dst.cols) {
        copy_from_host(host.data(), dst);
        return;
    }
    for (std::int64_t r = 0; r < dst.rows; ++r) {
        copy_from_host(host.data() + r * dst.cols, DenseView<float>{dst.data + r * dst.ld, 1,
                                                                    dst.cols, dst.cols});
    }
}

std::unique_ptr<MaxkPlan> Backend::make_maxk_plan(const Csr& a, std::int64_t dim, std::int64_t k,
                                                  const SpmmPlanHints& hints)
{
    static_cast<void>(a);
    static_cast<void>(dim);
    static_cast<void>(k);
    static_cast<void>(hints);
    HALO_THROW(InputError, "the ", name(), " backend has no MaxK kernels (maxk layers)");
}

void AttentionPlan::run_heads(DenseView<const float> q, DenseView<const float> k,
                              DenseView<const float> v, std::int64_t heads, float scale,
                              DenseView<float> out, RowRange rows)
{
    HALO_EXPECTS(heads >= 1 && q.cols % heads == 0, "Q's ", q.cols, " columns do not split into ",
                 heads, " heads");
    HALO_EXPECTS(k.cols == q.cols && v.cols == q.cols && out.cols == q.cols, "Q, K, V and O have ",
                 q.cols, ", ", k.cols, ", ", v.cols, " and ", out.cols, " columns");
    const std::int64_t d = q.cols / heads;
    const auto head = [d](auto m, std::int64_t h) {
        m.data += h * d;
        m.cols = d;
        return m;
    };
    for (std::int64_t h = 0; h < heads; ++h) {
        run(head(q, h), head(k, h), head(v, h), scale, head(out, h), rows);
    }
}

std::unique_ptr<AttentionPlan> Backend::make_attention_plan(const Csr& a, std::int64_t max_dim,
                                                            AttentionKernel kernel,
                                                            const SpmmPlanHints& hints)
{
    static_cast<void>(a);
    static_cast<void>(max_dim);
    static_cast<void>(kernel);
    static_cast<void>(hints);
    HALO_THROW(InputError, "the ", name(), " backend has no attention kernels");
}

std::unique_ptr<QuantizedSpmmPlan> Backend::make_quantized_spmm_plan(const Csr& a,
                                                                     std::int64_t max_dim)
{
    static_cast<void>(a);
    static_cast<void>(max_dim);
    HALO_THROW(InputError, "the ", name(), " backend has no int8-input SpMM");
}

namespace {

// Backend::make_streamed_spmm's default: a block's rows sliced on the host into a plan of their
// own, made when the block runs (prefetch only records the order).
class SlicedSpmm final : public StreamedSpmm {
public:
    SlicedSpmm(Backend& backend, const Csr& a, SpmmPlanHints hints)
        : backend_(backend), a_(a), hints_(std::move(hints))
    {
    }

    void prefetch(RowRange rows) override { static_cast<void>(rows); }

    void run(RowRange rows, DenseView<const float> x, DenseView<float> y) override
    {
        HALO_EXPECTS(y.rows == rows.size() && x.rows == a_.num_cols, "a block of ", rows.size(),
                     " rows into ", y.rows, " rows, reading ", x.rows, " rows of ", a_.num_cols);
        const auto block = slice_rows(a_, rows);
        auto hints = hints_;
        hints.ranges = {{0, rows.size()}};
        backend_.make_spmm_plan(block, hints)->run(x, y, {0, rows.size()});
        copied_ += 8 * (rows.size() + 1) +
                   block.nnz() * static_cast<std::int64_t>(a_.has_values() ? 8 : 4);
    }

    std::int64_t copied_bytes() const override { return copied_; }
    std::string algorithm() const override { return "a plan per row block"; }

private:
    Backend& backend_;
    const Csr& a_;
    SpmmPlanHints hints_;
    std::int64_t copied_ = 0;
};

}  // namespace

std::unique_ptr<SpmmPlan> Backend::make_scaled_spmm_plan(const Csr& pattern,
                                                         const SpmmPlanHints& hints,
                                                         const OperatorScaling& scaling)
{
    static_cast<void>(pattern);
    static_cast<void>(hints);
    static_cast<void>(scaling);
    return nullptr;  // the host builds the values (make_spmm_plan)
}

std::unique_ptr<StreamedSpmm> Backend::make_streamed_spmm(const Csr& a, const SpmmPlanHints& hints,
                                                          const OperatorScaling* scaling,
                                                          bool scaled_input)
{
    static_cast<void>(scaling);  // a's values, as in memory
    static_cast<void>(scaled_input);
    return std::make_unique<SlicedSpmm>(*this, a, hints);
}

void SpmmPlan::run_add(DenseView<const float> x, DenseView<float> y, RowRange rows)
{
    static_cast<void>(x);
    static_cast<void>(y);
    static_cast<void>(rows);
    HALO_THROW(LogicError, "run_add on an SpMM plan (", algorithm(),
               ") that does not add in place");
}

void StreamedSpmm::scale_input(DenseView<float> x, RowRange rows)
{
    static_cast<void>(x);
    static_cast<void>(rows);
    HALO_THROW(LogicError, "scale_input on a streamed operator (", algorithm(),
               ") that reads x as given");
}

void Backend::download_async(const Matrix& src, float* host)
{
    copy_to_host(src.view(), host);
}

void Backend::upload_async(const float* host, DenseView<float> dst)
{
    copy_from_host(host, dst);
}

std::optional<ActivationOverflow> Backend::round_activations(DenseView<float> y,
                                                             FeatureType type, std::int32_t store)
{
    static_cast<void>(y);
    static_cast<void>(store);
    HALO_EXPECTS(type == FeatureType::fp32, "the ", name(), " backend does not store ",
                 to_string(type), " activations");
    return std::nullopt;
}

void Backend::argmax_rows(DenseView<const float> src, std::int32_t* best)
{
    HALO_EXPECTS(src.cols > 0 || src.rows == 0, "argmax of rows of width 0");
    if (src.rows == 0) {
        return;
    }
    HALO_EXPECTS(best != nullptr && src.ld >= src.cols,
                 "argmax_rows needs an output and ld >= cols");
    std::vector<float> copy;
    const float* rows = src.data;
    std::int64_t ld = src.ld;
    if (!uses_host_memory()) {
        copy.resize(static_cast<std::size_t>(src.rows * src.cols));
        copy_to_host(src, copy.data());
        rows = copy.data();
        ld = src.cols;
    }
#pragma omp parallel for schedule(static) if (src.rows > (1 << 14))
    for (std::int64_t i = 0; i < src.rows; ++i) {
        best[i] = detail::argmax_row(rows + i * ld, src.cols);
    }
}

Matrix Backend::allocate_host(std::int64_t rows, std::int64_t cols)
{
    return reference::host_matrix(rows, cols, "");
}

namespace reference {

Matrix host_matrix(std::int64_t rows, std::int64_t cols, const char* advice)
{
    HALO_EXPECTS(rows >= 0 && cols >= 0, "cannot allocate ", rows, " x ", cols);
    const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    std::shared_ptr<float> storage(new (std::nothrow) float[count > 0 ? count : 1],
                                   std::default_delete<float[]>());
    if (!storage) {
        HALO_THROW(Error, "out of host memory allocating a ", rows, " x ", cols, " float matrix (",
                   count * sizeof(float) / (1 << 20), " MiB)", advice);
    }
    return Matrix(std::move(storage), rows, cols);
}

namespace {

class CpuQuantizedSpmmPlan final : public QuantizedSpmmPlan {
public:
    CpuQuantizedSpmmPlan(const Csr& a, std::optional<AesOptions> aes) : a_(a), aes_(aes) {}

    void run(const QuantizedView& x, DenseView<float> y, RowRange rows) override
    {
        if (aes_) {
            aes_spmm(a_.view(), x, y, rows, *aes_);
        } else {
            spmm_int8(a_.view(), x, y, rows);
        }
    }

    std::string algorithm() const override
    {
        return aes_ ? "reference-aes-int8-w" + std::to_string(aes_->sample_width) + "-" +
                          to_string(aes_->scaling)
                    : "reference-int8";
    }

private:
    Csr a_;
    std::optional<AesOptions> aes_;
};

class CpuMaxkPlan final : public MaxkPlan {
public:
    CpuMaxkPlan(const Csr& a, std::int64_t dim, std::int64_t k)
        : a_(a), s_(a.num_cols, dim, k), ssd_(make_cpu_ssd_plan(a_, dim))
    {
    }

    void topk(DenseView<const float> x) override
    {
        HALO_EXPECTS(x.rows <= s_.rows && x.cols == s_.dim, "top-k of ", x.rows, " x ", x.cols,
                     " into a CBSR of ", s_.rows, " x ", s_.dim);
        auto part = s_.view();
        part.rows = x.rows;
        maxk_topk(x, part);
    }

    void pack(RowRange rows, DenseView<float> records) override
    {
        check(rows, records.rows, records.cols);
        const auto k = s_.k;
#pragma omp parallel for schedule(static)
        for (std::int64_t i = rows.begin; i < rows.end; ++i) {
            auto* rec = reinterpret_cast<char*>(records.row(i));
            std::memset(rec, 0, static_cast<std::size_t>(records.cols) * sizeof(float));
            std::memcpy(rec, &s_.values[i * k], k * sizeof(float));
            std::memcpy(rec + k * sizeof(float), &s_.indices[i * k], k * sizeof(cbsr_index));
        }
    }

    void unpack(DenseView<const float> records, RowRange rows) override
    {
        check(rows, records.rows, records.cols);
        const auto k = s_.k;
        for (std::int64_t i = rows.begin; i < rows.end; ++i) {
            const auto* rec = reinterpret_cast<const char*>(records.row(i));
            std::memcpy(&s_.values[i * k], rec, k * sizeof(float));
            std::memcpy(&s_.indices[i * k], rec + k * sizeof(float), k * sizeof(cbsr_index));
        }
        // Received rows are input from another process: check them like a file.
        CbsrView<const float> received{s_.values.data() + rows.begin * k,
                                       s_.indices.data() + rows.begin * k,
                                       rows.end - rows.begin, s_.dim, k};
        validate(received, "received CBSR rows");
    }

    void aggregate(DenseView<float> out, RowRange rows) override
    {
        ssd_->run(s_.view(), out, rows);
    }

    std::string algorithm() const override { return "reference-ssd"; }

private:
    void check(RowRange rows, std::int64_t record_rows, std::int64_t record_cols) const
    {
        HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= s_.rows &&
                         rows.end <= record_rows,
                     "CBSR rows [", rows.begin, ", ", rows.end, ") of ", s_.rows);
        HALO_EXPECTS(record_cols == record_words(s_.k), "records of ", record_cols,
                     " words, k = ", s_.k, " needs ", record_words(s_.k));
    }

    Csr a_;
    Cbsr s_;
    std::unique_ptr<SsdPlan> ssd_;
};

class CpuAttentionPlan final : public AttentionPlan {
public:
    explicit CpuAttentionPlan(const Csr& a) : a_(a) {}

    void run(DenseView<const float> q, DenseView<const float> k, DenseView<const float> v,
             float scale, DenseView<float> out, RowRange rows) override
    {
        auto tmp = workspace(v.cols);
        sparse_attention(a_.view(), q, k, v, scale, tmp, rows);
        round_into(tmp, out, rows);
    }

    void run_additive(DenseView<const float> el, DenseView<const float> er, float negative_slope,
                      DenseView<const float> v, DenseView<float> out, RowRange rows) override
    {
        auto tmp = workspace(v.cols);
        additive_attention(a_.view(), el, er, negative_slope, v, tmp, rows);
        round_into(tmp, out, rows);
    }

    std::string algorithm() const override { return "reference-fp64"; }

private:
    DenseView<double> workspace(std::int64_t cols)
    {
        const auto need = static_cast<std::size_t>(a_.num_rows * cols);
        if (work_.size() < need) {
            work_.resize(need);
        }
        return {work_.data(), a_.num_rows, cols, cols};
    }

    static void round_into(DenseView<const double> tmp, DenseView<float> out, RowRange rows)
    {
        HALO_EXPECTS(out.cols == tmp.cols && out.rows >= rows.end, "attention output ", out.rows,
                     " x ", out.cols, " for rows up to ", rows.end, " of width ", tmp.cols);
#pragma omp parallel for schedule(static)
        for (std::int64_t i = rows.begin; i < rows.end; ++i) {
            for (std::int64_t j = 0; j < out.cols; ++j) {
                out(i, j) = static_cast<float>(tmp(i, j));
            }
        }
    }

    Csr a_;
    std::vector<double> work_;
};

}  // namespace

std::unique_ptr<MaxkPlan> make_cpu_maxk_plan(const Csr& a, std::int64_t dim, std::int64_t k)
{
    check_cbsr_shape(a.num_cols, dim, k);
    return std::make_unique<CpuMaxkPlan>(a, dim, k);
}

std::unique_ptr<QuantizedSpmmPlan> make_cpu_quantized_spmm_plan(const Csr& a,
                                                                std::optional<AesOptions> aes)
{
    return std::make_unique<CpuQuantizedSpmmPlan>(a, aes);
}

std::unique_ptr<AttentionPlan> make_cpu_attention_plan(const Csr& a)
{
    return std::make_unique<CpuAttentionPlan>(a);
}

}  // namespace reference
}  // namespace halo
