// AES-SpMM plans (include/halo/kernels/cuda/aes.hpp): the device copy of the operator, the operand
// checks and the launches of aes.cu on the compute stream; plus the int8 feature upload and the
// Frobenius sums that measure an approximation.
#include "halo/kernels/cuda/aes.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cuda/aes/aes_kernels.hpp"
#include "cuda/primitives/spmm_checks.hpp"
#include "cuda/primitives/upload.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda_error.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {
namespace {

using detail::upload;

// The rows of one layout whose slots exceed a group's staging (aes_kernels.hpp): sorted row ids,
// the prefix of their piece counts (host copies for slicing a row range, device copies for the
// kernels) and the workspace of one partial row per piece.
struct SplitSchedule {
    std::vector<std::int64_t> rows;
    std::vector<std::int64_t> first{0};
    DeviceBuffer<std::int64_t> d_rows;
    DeviceBuffer<std::int64_t> d_first;
    DeviceBuffer<float> partials;
};

// The operator on the device and the rule (W = 0: exact), shared by the fp32 and int8 plans.
class AesOperator {
public:
    AesOperator(Context& ctx, const Csr& a, std::int64_t max_dim, std::int64_t sample_width,
                AesScaling scaling)
        : ctx_(ctx),
          num_rows_(a.num_rows),
          num_cols_(a.num_cols),
          max_dim_(max_dim),
          sample_width_(sample_width),
          scaling_(scaling)
    {
        HALO_EXPECTS(max_dim >= 1, "max_dim ", max_dim, " must be at least 1");
        if (sample_width != 0) {
            validate(AesOptions{sample_width, scaling});
        }
        validate(a, sample_width != 0 ? "the operator of an AES-SpMM plan"
                                      : "the operator of an int8 SpMM plan");
        max_row_nnz_ = max_row_nnz(a.view());
        // Rows that some layout may split (more slots than the smallest staging, 32 slots).
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const auto count = slots(a.row_nnz(i));
            if (count > 32) {
                long_rows_.push_back(i);
                long_counts_.push_back(count);
            }
        }
        indptr_ = upload(ctx, a.indptr);
        indices_ = upload(ctx, a.indices);
        if (a.has_values()) {
            values_ = upload(ctx, a.values);
        }
        // Once, at setup: a failed upload surfaces here rather than in a later run.
        HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
        if (sample_width != 0) {
            describe(a);
        }
    }

    Context& ctx() const noexcept { return ctx_; }
    bool exact() const noexcept { return sample_width_ == 0; }

    void check(std::int64_t x_rows, std::int64_t x_cols, std::int64_t x_ld, DenseView<float> y,
               RowRange rows) const
    {
        // The shape checks every SpMM plan makes; only the shape of x matters to them.
        detail::check_spmm_operands(DenseView<const float>{nullptr, x_rows, x_cols, x_ld}, y, rows,
                                    num_rows_, num_cols_, max_dim_);
        HALO_EXPECTS(rows.empty() || x_cols == 0 || y.data != nullptr, "null output");
    }

    // Launches on the compute stream; `launch_kernels(launch, layout, split)` issues the kernels
    // for the feature type at hand.
    template <typename Launcher>
    void run(std::int64_t dim, bool vec4, DenseView<float> y, RowRange rows,
             Launcher&& launch_kernels)
    {
        if (rows.empty() || dim == 0) {
            return;
        }
        const auto layout = detail::aes_layout(dim, vec4, sample_width_, max_row_nnz_);
        const SplitSchedule& schedule = split_schedule(layout);
        detail::AesLaunch l;
        l.indptr = indptr_.data();
        l.indices = indices_.data();
        l.values = values_.data();
        l.row_begin = rows.begin;
        l.row_end = rows.end;
        l.sample_width = sample_width_;
        l.rescaled = scaling_ == AesScaling::rescaled;
        l.dim = dim;
        l.y = y.data;
        l.ldy = y.ld;
        detail::AesSplit split;
        const auto& r = schedule.rows;
        split.begin = std::lower_bound(r.begin(), r.end(), rows.begin) - r.begin();
        split.end = std::lower_bound(r.begin(), r.end(), rows.end) - r.begin();
        split.pieces = schedule.first[split.end] - schedule.first[split.begin];
        split.rows = schedule.d_rows.data();
        split.first = schedule.d_first.data();
        split.partials = schedule.partials.data();
        launch_kernels(l, layout, split);
    }

    std::string name(const char* prefix) const
    {
        return std::string(prefix) + "w" + std::to_string(sample_width_) + "-" +
               to_string(scaling_);
    }
    const std::string& report() const noexcept { return report_; }

private:
    std::int64_t slots(std::int64_t nnz) const
    {
        return sample_width_ > 0 ? aes_row_strategy(nnz, sample_width_).count() : nnz;
    }

    // The split rows of a layout's staging capacity, made on the first run with that group size
    // (host work and one upload, then cached). The workspace holds a partial row per piece, as
    // wide as the widths that use this group size can be.
    const SplitSchedule& split_schedule(const detail::AesLayout& layout)
    {
        auto it = schedules_.find(layout.group);
        if (it != schedules_.end()) {
            return it->second;
        }
        SplitSchedule s;
        for (std::size_t k = 0; k < long_rows_.size(); ++k) {
            if (long_counts_[k] > layout.capacity) {
                s.rows.push_back(long_rows_[k]);
                s.first.push_back(s.first.back() +
                                  (long_counts_[k] + layout.capacity - 1) / layout.capacity);
            }
        }
        if (!s.rows.empty()) {
            const std::int64_t width =
                layout.group == 32 ? max_dim_ : std::min<std::int64_t>(max_dim_, layout.group * 4);
            s.d_rows = upload(ctx_, s.rows);
            s.d_first = upload(ctx_, s.first);
            s.partials =
                DeviceBuffer<float>(ctx_, static_cast<std::size_t>(s.first.back() * width));
            HALO_CUDA_TRY(cudaStreamSynchronize(ctx_.compute_stream()));
        }
        return schedules_.emplace(layout.group, std::move(s)).first->second;
    }

    // How much the rule keeps (slots counted with repeats; aes_sample_stats counts distinct).
    void describe(const Csr& a)
    {
        std::int64_t sampled_rows = 0;
        std::int64_t total = 0;
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const auto nnz = a.row_nnz(i);
            sampled_rows += nnz > sample_width_ ? 1 : 0;
            total += slots(nnz);
        }
        std::ostringstream os;
        os << "aes W=" << sample_width_ << " " << to_string(scaling_) << ": " << sampled_rows
           << " of " << a.num_rows << " rows sampled, " << total << " of " << a.nnz()
           << " nonzeros staged (" << std::fixed << std::setprecision(1)
           << (a.nnz() > 0 ? 100.0 * static_cast<double>(total) / static_cast<double>(a.nnz())
                           : 100.0)
           << "%)";
        report_ = os.str();
    }

    Context& ctx_;
    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    std::int64_t max_dim_ = 0;
    std::int64_t sample_width_ = 0;
    AesScaling scaling_ = AesScaling::sample_sum;
    std::int64_t max_row_nnz_ = 0;
    std::vector<std::int64_t> long_rows_;
    std::vector<std::int64_t> long_counts_;
    DeviceBuffer<std::int64_t> indptr_;
    DeviceBuffer<std::int32_t> indices_;
    DeviceBuffer<float> values_;              // empty for a pattern matrix
    std::map<int, SplitSchedule> schedules_;  // by group size
    std::string report_;
};

class AesSpmmPlan final : public SpmmPlan {
public:
    AesSpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim, const AesOptions& options)
        : op_(ctx, a, max_dim, options.sample_width, options.scaling)
    {
    }

    void run(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        op_.check(x.rows, x.cols, x.ld, y, rows);
        HALO_EXPECTS(rows.empty() || x.cols == 0 || x.data != nullptr || x.rows == 0,
                     "null features");
        const cudaStream_t stream = op_.ctx().compute_stream();
        op_.run(x.cols, detail::aes_vec4(x.data, x.ld, y.data, y.ld, x.cols), y, rows,
                [&](const auto& l, const auto& layout, const auto& split) {
                    detail::aes_spmm(stream, l, layout, split, x.data, x.ld);
                });
    }

    std::string algorithm() const override { return op_.name("aes-"); }
    bool exact() const override { return false; }
    std::string report() const override { return op_.report(); }

private:
    AesOperator op_;
};

class AesInt8SpmmPlan final : public Int8SpmmPlan {
public:
    AesInt8SpmmPlan(Context& ctx, const Csr& a, std::int64_t max_dim, std::int64_t sample_width,
                    AesScaling scaling)
        : op_(ctx, a, max_dim, sample_width, scaling)
    {
    }

    void run(const QuantizedView& x, DenseView<float> y, RowRange rows) override
    {
        op_.check(x.rows, x.cols, x.ld, y, rows);
        HALO_EXPECTS(rows.empty() || x.cols == 0 ||
                         (x.scale != nullptr && x.zero_point != nullptr &&
                          (x.data != nullptr || x.rows == 0)),
                     "int8 features without data, scales or zero points");
        const cudaStream_t stream = op_.ctx().compute_stream();
        op_.run(x.cols, detail::aes_vec4(x, y.data, y.ld, x.cols), y, rows,
                [&](const auto& l, const auto& layout, const auto& split) {
                    detail::aes_spmm(stream, l, layout, split, x);
                });
    }

    std::string algorithm() const override
    {
        return op_.exact() ? "int8-exact" : op_.name("aes-int8-");
    }
    std::string report() const override { return op_.report(); }

private:
    AesOperator op_;
};

}  // namespace

std::unique_ptr<SpmmPlan> make_aes_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim,
                                             const AesOptions& options)
{
    validate(options);
    return std::make_unique<AesSpmmPlan>(ctx, a, max_dim, options);
}

std::unique_ptr<SpmmPlan> aes_spmm_factory(Context& ctx, const Csr& a,
                                           const SpmmPlanRequest& request)
{
    return make_aes_spmm_plan(ctx, a, request.max_dim, request.aes);
}

std::unique_ptr<Int8SpmmPlan> make_aes_int8_spmm_plan(Context& ctx, const Csr& a,
                                                      std::int64_t max_dim,
                                                      const AesOptions& options)
{
    validate(options);
    return std::make_unique<AesInt8SpmmPlan>(ctx, a, max_dim, options.sample_width,
                                             options.scaling);
}

std::unique_ptr<Int8SpmmPlan> make_int8_spmm_plan(Context& ctx, const Csr& a, std::int64_t max_dim)
{
    return std::make_unique<AesInt8SpmmPlan>(ctx, a, max_dim, 0, AesScaling::sample_sum);
}

DeviceQuantizedMatrix upload_quantized(Context& ctx, const QuantizedMatrix& q, const char* what)
{
    validate(q, what);
    DeviceQuantizedMatrix d;
    d.rows = q.rows;
    d.cols = q.cols;
    d.data = upload(ctx, q.data);
    d.scale = upload(ctx, q.scale);
    d.zero_point = upload(ctx, q.zero_point);
    HALO_CUDA_TRY(cudaStreamSynchronize(ctx.compute_stream()));
    return d;
}

FrobeniusSums frobenius_sums(Context& ctx, DenseView<const float> approx,
                             DenseView<const float> exact)
{
    HALO_EXPECTS(approx.rows == exact.rows && approx.cols == exact.cols, "shapes ", approx.rows,
                 " x ", approx.cols, " and ", exact.rows, " x ", exact.cols, " differ");
    const cudaStream_t stream = ctx.compute_stream();
    DeviceBuffer<double> sums(ctx, 2);
    HALO_CUDA_TRY(cudaMemsetAsync(sums.data(), 0, sums.bytes(), stream));
    detail::frobenius_sums(stream, approx, exact, sums.data());
    double host[2] = {0.0, 0.0};
    HALO_CUDA_TRY(cudaMemcpyAsync(host, sums.data(), sizeof(host), cudaMemcpyDeviceToHost, stream));
    HALO_CUDA_TRY(cudaStreamSynchronize(stream));
    return {host[0], host[1]};
}

}  // namespace halo::cuda
