// The CUDA backend's MaxK and attention plans (engine_plans.hpp) over the MaxK, Fused3S and
// unfused attention kernels; the record and normalization kernels are in engine_plans.cu.
//
// Choices:
// - MaxK: one device CBSR of the operator's columns (owned then halo rows) lives in the plan; the
//   SSD plan takes the edge groups stored in the dataset when they were built for this operator
//   (edge_groups_from_metadata checks the fingerprint and validates them), else builds them.
// - Unpacked records come from another process: the device checks every index (range, ascending)
//   and the host waits for the verdict (one 8-byte copy and a stream synchronization per unpack)
//   so that a corrupt record is an InputError naming row, entry and value, never a wrong product.
// - Attention plans are built on first use: a GAT layer never needs the fused kernel, and an
//   exact layer never needs the BSB. A stored BSB is decoded (and checked) when the plan is made,
//   so a corrupt dataset fails at start-up rather than at the first layer.
// - Q, K, V and O may be column slices of wider matrices (ld > cols): the fused plan's fp32 entry
//   converts with the input ld into its own fp16 workspaces and stores O with O's ld; the unfused
//   plan passes leading dimensions to its kernels and cuSPARSE. el and er (columns of n x heads
//   matrices) are gathered into contiguous workspaces because the unfused kernel reads them with
//   unit stride.
#include "cuda/backend/engine_plans.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/kernels/cuda/aes.hpp"
#include "halo/kernels/cuda/fused3s.hpp"
#include "halo/kernels/cuda/maxk.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/fused3s_metadata.hpp"
#include "halo/kernels_host/maxk_metadata.hpp"

namespace halo::cuda {
namespace detail {

// engine_plans.cu: records of CBSR rows `rows` into the same rows of `records` (ld words), and
// back with the first bad entry's position ((row - rows.begin) * k + entry; all ones: none) in
// *first_bad.
void pack_maxk_records(cudaStream_t stream, CbsrView<const float> s, RowRange rows,
                       std::int64_t words, float* records, std::int64_t ld);
void unpack_maxk_records(cudaStream_t stream, const float* records, std::int64_t ld, RowRange rows,
                         CbsrView<float> s, unsigned long long* first_bad);

}  // namespace detail

namespace {

const KernelMetadata* find_stored(const SpmmPlanHints& hints, const char* kernel)
{
    for (const auto& md : hints.stored) {
        if (md.kernel == kernel && md.op == hints.op) {
            return &md;
        }
    }
    return nullptr;
}

class CudaMaxkPlan final : public MaxkPlan {
public:
    CudaMaxkPlan(Context& ctx, const Csr& a, std::int64_t dim, std::int64_t k,
                 const SpmmPlanHints& hints)
        : ctx_(ctx), s_(make_device_cbsr(ctx, a.num_cols, dim, k)), first_bad_(ctx, 1)
    {
        // Groups longest first for every range the engine runs: all rows (no overlap, one
        // rank), and the interior and the boundary rows.
        SsdOptions options;
        options.ordered_ranges.push_back({0, a.num_rows});
        for (const auto& r : hints.ranges) {
            if (r.begin >= 0 && r.begin < r.end && r.end <= a.num_rows &&
                (r.begin > 0 || r.end < a.num_rows)) {
                options.ordered_ranges.push_back(r);
            }
        }
        if (const auto* md = find_stored(hints, maxk_metadata_kernel)) {
            ssd_ = make_ssd_plan(ctx, a, dim, edge_groups_from_metadata(*md, a.view()), options);
            groups_ = "stored edge groups";
        } else {
            ssd_ = make_ssd_plan(ctx, a, dim, options);
            groups_ = "edge groups built here";
        }
    }

    void topk(DenseView<const float> x) override
    {
        HALO_EXPECTS(x.rows <= s_.rows && x.cols == s_.dim, "top-k of ", x.rows, " x ", x.cols,
                     " into a CBSR of ", s_.rows, " x ", s_.dim);
        auto part = s_.view();
        part.rows = x.rows;
        maxk_topk(ctx_, x, part);
    }

    void pack(RowRange rows, DenseView<float> records) override
    {
        check(rows, records.rows, records.cols, records.ld);
        detail::pack_maxk_records(ctx_.compute_stream(), s_.cview(), rows, records.cols,
                                  records.data, records.ld);
    }

    void unpack(DenseView<const float> records, RowRange rows) override
    {
        check(rows, records.rows, records.cols, records.ld);
        if (rows.empty()) {
            return;
        }
        const cudaStream_t stream = ctx_.compute_stream();
        detail::unpack_maxk_records(stream, records.data, records.ld, rows, s_.view(),
                                    first_bad_.data());
        unsigned long long first_bad = 0;
        HALO_CUDA_TRY(cudaMemcpyAsync(&first_bad, first_bad_.data(), sizeof(first_bad),
                                      cudaMemcpyDeviceToHost, stream));
        HALO_CUDA_TRY(cudaStreamSynchronize(stream));
        if (first_bad != ~0ULL) {
            report_bad_entry(rows, static_cast<std::int64_t>(first_bad));
        }
    }

    void aggregate(DenseView<float> out, RowRange rows) override
    {
        HALO_EXPECTS(out.cols == s_.dim, "MaxK aggregation into ", out.cols,
                     " columns, the CBSR has ", s_.dim);
        ssd_->run(s_.cview(), out, rows);
    }

    std::string algorithm() const override
    {
        return fmt::format("maxk-ssd {} ({})", ssd_->describe(SsdLaunch{}, s_.dim, s_.k), groups_);
    }

private:
    void check(RowRange rows, std::int64_t record_rows, std::int64_t record_cols,
               std::int64_t record_ld) const
    {
        HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= s_.rows &&
                         rows.end <= record_rows,
                     "CBSR rows [", rows.begin, ", ", rows.end, ") of ", s_.rows, " (records of ",
                     record_rows, " rows)");
        HALO_EXPECTS(record_cols == record_words(s_.k), "records of ", record_cols,
                     " words, k = ", s_.k, " needs ", record_words(s_.k));
        HALO_EXPECTS(record_ld >= record_cols, "records' leading dimension ", record_ld, " below ",
                     record_cols);
    }

    // The device found entry `pos` of the received rows bad: read its row back and say why.
    [[noreturn]] void report_bad_entry(RowRange rows, std::int64_t pos) const
    {
        const std::int64_t row = rows.begin + pos / s_.k;
        const std::int64_t entry = pos % s_.k;
        std::vector<cbsr_index> indices(static_cast<std::size_t>(s_.k));
        HALO_CUDA_TRY(cudaMemcpy(indices.data(), s_.indices.data() + row * s_.k,
                                 indices.size() * sizeof(cbsr_index), cudaMemcpyDeviceToHost));
        const auto j = indices[static_cast<std::size_t>(entry)];
        if (j < 0 || j >= s_.dim) {
            HALO_THROW(InputError, "received CBSR rows: row ", row, " entry ", entry, ": column ",
                       j, " outside [0, ", s_.dim, ")");
        }
        HALO_THROW(InputError, "received CBSR rows: row ", row, " entry ", entry, ": column ", j,
                   " does not follow column ", indices[static_cast<std::size_t>(entry - 1)],
                   " (columns must ascend)");
    }

    Context& ctx_;
    DeviceCbsr s_;
    DeviceBuffer<unsigned long long> first_bad_;
    std::unique_ptr<DeviceSsdPlan> ssd_;
    std::string groups_;
};

class CudaAttentionPlan final : public AttentionPlan {
public:
    CudaAttentionPlan(Context& ctx, const Csr& a, std::int64_t max_dim, AttentionKernel kernel,
                      const SpmmPlanHints& hints)
        : ctx_(ctx), a_(a), max_dim_(max_dim), kernel_(kernel)
    {
        if (kernel_ == AttentionKernel::fused) {
            if (const auto* md = find_stored(hints, fused3s_metadata_kernel)) {
                stored_bsb_ = bsb_from_metadata(*md, a_);
            }
        }
    }

    void run(DenseView<const float> q, DenseView<const float> k, DenseView<const float> v,
             float scale, DenseView<float> out, RowRange rows) override
    {
        const std::int64_t d = q.cols;
        HALO_EXPECTS(k.cols == d, "Q has ", d, " columns, K has ", k.cols);
        HALO_EXPECTS(v.cols == out.cols, "V has ", v.cols, " columns, O has ", out.cols);
        HALO_EXPECTS(d <= max_dim_ && v.cols <= max_dim_, "attention widths ", d, " and ", v.cols,
                     " exceed the plan's max_dim ", max_dim_);
        if (fused_applies(d, v.cols)) {
            fused_plan().run_heads(q, k, v, 1, scale, out, rows);
            return;
        }
        unfused().run(q, k, v, scale, out, rows);
    }

    void run_heads(DenseView<const float> q, DenseView<const float> k, DenseView<const float> v,
                   std::int64_t heads, float scale, DenseView<float> out, RowRange rows) override
    {
        HALO_EXPECTS(heads >= 1 && q.cols % heads == 0, "Q's ", q.cols,
                     " columns do not split into ", heads, " heads");
        HALO_EXPECTS(q.cols <= max_dim_, "attention width ", q.cols, " exceeds the plan's max_dim ",
                     max_dim_);
        const std::int64_t d = q.cols / heads;
        if (k.cols == q.cols && v.cols == q.cols && out.cols == q.cols && fused_applies(d, d)) {
            // Every head in one conversion of each operand and one launch.
            fused_plan().run_heads(q, k, v, heads, scale, out, rows);
            return;
        }
        AttentionPlan::run_heads(q, k, v, heads, scale, out, rows);
    }
    void run_additive(DenseView<const float> el, DenseView<const float> er, float negative_slope,
                      DenseView<const float> v, DenseView<float> out, RowRange rows) override
    {
        HALO_EXPECTS(el.cols == 1 && er.cols == 1, "el and er must be single columns, given ",
                     el.cols, " and ", er.cols);
        HALO_EXPECTS(el.rows >= a_.num_rows && er.rows >= a_.num_cols, "el has ", el.rows,
                     " rows, er ", er.rows, "; the pattern is ", a_.num_rows, " x ", a_.num_cols);
        HALO_EXPECTS(el.ld >= 1 && er.ld >= 1, "leading dimensions ", el.ld, " and ", er.ld);
        HALO_EXPECTS(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= a_.num_rows,
                     "row range [", rows.begin, ", ", rows.end, ") outside [0, ", a_.num_rows, ")");
        note("unfused-fp32 additive");
        auto& plan = unfused();
        if (el_.size() == 0 && a_.num_rows > 0) {
            el_ = DeviceBuffer<float>(ctx_, static_cast<std::size_t>(a_.num_rows));
        }
        if (er_.size() == 0 && a_.num_cols > 0) {
            er_ = DeviceBuffer<float>(ctx_, static_cast<std::size_t>(a_.num_cols));
        }
        const cudaStream_t stream = ctx_.compute_stream();
        // The kernel reads el of the range's rows and er of every column.
        if (!rows.empty()) {
            HALO_CUDA_TRY(cudaMemcpy2DAsync(el_.data() + rows.begin, sizeof(float),
                                            el.data + rows.begin * el.ld, el.ld * sizeof(float),
                                            sizeof(float), static_cast<std::size_t>(rows.size()),
                                            cudaMemcpyDeviceToDevice, stream));
        }
        if (a_.num_cols > 0 && !rows.empty()) {
            HALO_CUDA_TRY(cudaMemcpy2DAsync(
                er_.data(), sizeof(float), er.data, er.ld * sizeof(float), sizeof(float),
                static_cast<std::size_t>(a_.num_cols), cudaMemcpyDeviceToDevice, stream));
        }
        plan.run_additive(el_.data(), er_.data(), negative_slope, v, out, rows);
    }

    std::string algorithm() const override
    {
        if (ran_.empty()) {
            if (kernel_ == AttentionKernel::exact) {
                return "unfused-fp32";
            }
            return fmt::format("fused3s ({}) for head widths 1-256, unfused-fp32 otherwise",
                               stored_bsb_ ? "stored BSB" : "BSB built on first use");
        }
        std::string s;
        for (const auto& r : ran_) {
            s += (s.empty() ? "" : "; ") + r;
        }
        return s;
    }

private:
    // Whether a head of widths d (Q, K) and dv (V, O) runs fused, noting what runs either way.
    bool fused_applies(std::int64_t d, std::int64_t dv)
    {
        if (kernel_ != AttentionKernel::fused) {
            note("unfused-fp32");
            return false;
        }
        const std::int64_t padded = fused3s_padded_dim(d);
        if (padded > 0 && dv == d) {
            note(padded == d
                     ? fmt::format("fused3s (d={}, {})", d, bsb_name())
                     : fmt::format("fused3s (d={} padded to {}, {})", d, padded, bsb_name()));
            return true;
        }
        note(dv == d ? fmt::format("unfused-fp32 (fused has no d={} instance)", d)
                     : fmt::format("unfused-fp32 (fused needs equal widths, d={} dv={})", d, dv));
        return false;
    }

    const char* bsb_name() const
    {
        return fused_ ? bsb_.c_str() : (stored_bsb_ ? "stored BSB" : "BSB built here");
    }

    Fused3sPlan& fused_plan()
    {
        if (!fused_) {
            bsb_ = stored_bsb_ ? "stored BSB" : "BSB built here";
            fused_ = stored_bsb_ ? make_fused3s_plan(ctx_, std::move(*stored_bsb_), max_dim_)
                                 : make_fused3s_plan(ctx_, a_, max_dim_);
            stored_bsb_.reset();
        }
        return *fused_;
    }

    void note(std::string what)
    {
        if (std::find(ran_.begin(), ran_.end(), what) == ran_.end()) {
            ran_.push_back(std::move(what));
        }
    }

    UnfusedAttentionPlan& unfused()
    {
        if (!unfused_) {
            unfused_ = make_unfused_attention_plan(ctx_, a_);
        }
        return *unfused_;
    }

    Context& ctx_;
    Csr a_;
    std::int64_t max_dim_;
    AttentionKernel kernel_;
    std::optional<Bsb> stored_bsb_;
    std::string bsb_;
    std::unique_ptr<Fused3sPlan> fused_;
    std::unique_ptr<UnfusedAttentionPlan> unfused_;
    DeviceBuffer<float> el_;
    DeviceBuffer<float> er_;
    std::vector<std::string> ran_;  // what the runs so far executed, in first-use order
};

}  // namespace

std::unique_ptr<MaxkPlan> make_cuda_maxk_plan(Context& ctx, const Csr& a, std::int64_t dim,
                                              std::int64_t k, const SpmmPlanHints& hints)
{
    if (dim < 1 || dim > kMaxkMaxDim || k < 1 || k > dim) {
        HALO_THROW(InputError, "MaxK needs 1 <= k <= dim <= ", kMaxkMaxDim, ", given dim = ", dim,
                   " and k = ", k);
    }
    return std::make_unique<CudaMaxkPlan>(ctx, a, dim, k, hints);
}

std::unique_ptr<AttentionPlan> make_cuda_attention_plan(Context& ctx, const Csr& a,
                                                        std::int64_t max_dim,
                                                        AttentionKernel kernel,
                                                        const SpmmPlanHints& hints)
{
    if (max_dim < 1) {
        HALO_THROW(InputError, "attention plan for widths up to ", max_dim);
    }
    return std::make_unique<CudaAttentionPlan>(ctx, a, max_dim, kernel, hints);
}

namespace {

class QuantizedSpmmAdapter final : public QuantizedSpmmPlan {
public:
    explicit QuantizedSpmmAdapter(std::unique_ptr<Int8SpmmPlan> plan) : plan_(std::move(plan)) {}
    void run(const QuantizedView& x, DenseView<float> y, RowRange rows) override
    {
        plan_->run(x, y, rows);
    }
    std::string algorithm() const override { return plan_->algorithm(); }

private:
    std::unique_ptr<Int8SpmmPlan> plan_;
};

}  // namespace

std::unique_ptr<QuantizedSpmmPlan> make_cuda_quantized_spmm_plan(Context& ctx, const Csr& a,
                                                                 std::int64_t max_dim,
                                                                 const AesOptions* aes)
{
    return std::make_unique<QuantizedSpmmAdapter>(
        aes != nullptr ? make_aes_int8_spmm_plan(ctx, a, max_dim, *aes)
                       : make_int8_spmm_plan(ctx, a, max_dim));
}

}  // namespace halo::cuda
