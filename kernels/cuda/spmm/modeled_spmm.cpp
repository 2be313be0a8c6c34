// The cost model's SpMM plan (include/halo/kernels/cuda/backend.hpp, make_modeled_spmm_plan): the
// kernel halo/kernels_host/spmm_cost_model.hpp picks for the operator's shape at each width,
// nothing timed. The kernels that widths 1..max_dim can pick are built at once (the engine records
// a graph after its first run, so nothing may be built later); MergePath is built once with its
// cost set per width. A kernel that rejects the operator (halo::InputError or LogicError) is
// replaced by cuSPARSE for the widths that picked it (by MergePath for fp16 / bf16 X, which
// cuSPARSE does not read), and the report says so. The plan is a FeatureSpmmPlan: X of each type
// in SpmmPlanRequest::x_types gets the model's choice for that type (spmm_cost_model's x_type).
#include <algorithm>
#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/primitives/spmm_checks.hpp"
#include "halo/core/error.hpp"
#include "halo/kernels/cuda/backend.hpp"
#include "halo/kernels/cuda/device.hpp"
#include "halo/kernels/cuda/lowp_spmm.hpp"
#include "halo/kernels/cuda/mergepath.hpp"
#include "halo/kernels/cuda/rowsplit.hpp"
#include "halo/kernels_host/spmm_cost_model.hpp"
#include "halo/kernels_host/spmm_registry.hpp"

namespace halo::cuda {
namespace {

constexpr std::size_t kKernels = 5;  // the ModeledKernel values
constexpr std::array<FeatureType, 3> kTypes{FeatureType::fp32, FeatureType::fp16,
                                            FeatureType::bf16};

std::size_t slot(ModeledKernel k)
{
    return static_cast<std::size_t>(k);
}

class ModeledSpmmPlan final : public FeatureSpmmPlan {
public:
    ModeledSpmmPlan(Context& ctx, const Csr& a, const SpmmPlanRequest& request,
                    const OperatorScaling* scaling)
        : num_rows_(a.num_rows),
          num_cols_(a.num_cols),
          max_dim_(request.max_dim),
          shape_(operator_shape(a.view())),
          cache_bytes_(device_info(ctx.device()).l2_cache_bytes),
          zeroing_overlapped_(zeroing_overlapped(ctx.device())),
          l2_hints_(request.l2_hints),
          form_(spmm_form(scaling, request.pattern_operators)),
          x_types_(request.x_types | spmm_x_fp32)
    {
        HALO_EXPECTS(max_dim_ >= 1, "max_dim ", max_dim_, " must be at least 1");
        // needed[k]: the X types kernel k runs for (SpmmXType bits).
        std::array<unsigned, kKernels> needed{};
        MergePathOptions mergepath;
        mergepath.prepare_at_setup = false;  // the schedules of the widths that run, on first use
        for (const auto type : kTypes) {
            if ((x_types_ & spmm_x_bit(type)) == 0) {
                continue;
            }
            for (std::int64_t w = 1; w <= max_dim_; ++w) {
                const auto c = choose(w, type);
                needed[slot(c.kernel)] |= spmm_x_bit(type);
                if (c.kernel == ModeledKernel::mergepath && c.mergepath_cost > 0 &&
                    (mergepath.wide_from == 0 || w < mergepath.wide_from)) {
                    mergepath.wide_from = w;
                    mergepath.wide_cost = c.mergepath_cost;
                }
                if (c.l2_hints && mergepath.hint_hot_bytes == 0) {
                    // The plan hints where X (one slice of it) is past the model's factor: the
                    // widths the model hints at, and no others.
                    mergepath = with_large_x_hints(ctx, max_dim_, mergepath);
                }
            }
        }
        for (const auto k :
             {ModeledKernel::accel_gcn, ModeledKernel::rowsplit, ModeledKernel::rowchunk,
              ModeledKernel::mergepath, ModeledKernel::cusparse}) {
            if (needed[slot(k)] == 0) {
                continue;
            }
            if (k == ModeledKernel::cusparse) {
                // The last resort: its rejection propagates, as before 16-bit X.
                plans_[slot(k)] = build(ctx, a, request, scaling, k, mergepath);
                continue;
            }
            try {
                plans_[slot(k)] = build(ctx, a, request, scaling, k, mergepath);
            } catch (const InputError& e) {
                reject(k, needed, e.what());
            } catch (const LogicError& e) {
                reject(k, needed, e.what());
            }
        }
    }

    // Where every kernel built adds in place (all but Accel-GCN).
    bool adds_in_place() const override
    {
        return std::all_of(plans_.begin(), plans_.end(),
                           [](const auto& p) { return p == nullptr || p->adds_in_place(); });
    }

    void run_features(FeatureView x, DenseView<float> y, RowRange rows) override
    {
        run_rows(x, y, rows, false);
    }

    // The types its request asked for (x_types_): the kernels for those are built.
    bool reads_features(FeatureType type) const override
    {
        return (x_types_ & spmm_x_bit(type)) != 0;
    }

    void run_add(DenseView<const float> x, DenseView<float> y, RowRange rows) override
    {
        HALO_EXPECTS(adds_in_place(),
                     "run_add on a cost-model plan with Accel-GCN among its kernels");
        run_rows({x.data, FeatureType::fp32, x.rows, x.cols, x.ld}, y, rows, true);
    }

    std::string algorithm() const override
    {
        if (last_ == kKernels) {
            return "model";
        }
        return "model(" + plans_[last_]->algorithm() +
               (last_slice_ > 0 ? ", column slices of " + std::to_string(last_slice_) : "") + ")";
    }

    std::string report() const override
    {
        std::string out;
        for (const auto& [key, text] : decisions_) {
            out += "cost model: " + text + "\n";
        }
        for (const auto& n : notes_) {
            out += "note: " + n + "\n";
        }
        return out;
    }

    MemoryReport memory() const override
    {
        MemoryReport total;
        std::int64_t nnz = 0;
        for (const auto& p : plans_) {
            if (p) {
                total += p->memory();
                nnz = std::max(nnz, p->memory().nonzeros);
            }
        }
        total.nonzeros = nnz;  // the operator once: bytes per nonzero then show the copies
        return total;
    }

private:
    // Kernel k rejected the operator: the X types it was needed for run the fallback instead,
    // built after it (MergePath and cuSPARSE come last); where k is the fallback itself (MergePath
    // for 16-bit X), nothing runs that type: halo::InputError.
    void reject(ModeledKernel k, std::array<unsigned, kKernels>& needed, const std::string& why)
    {
        const unsigned types = needed[slot(k)];
        needed[slot(k)] = 0;
        for (const auto type : kTypes) {
            if ((types & spmm_x_bit(type)) == 0) {
                continue;
            }
            const auto f = fallback_kernel(type);
            if (f == k) {
                HALO_THROW(InputError, to_string(k), " rejected the operator, and no other ",
                           "kernel of the cost model reads ", to_string(type), " X: ", why);
            }
            notes_.push_back(to_string(k) + " rejected the operator, " + to_string(f) +
                             " instead for " + to_string(type) + " X: " + why);
            needed[slot(f)] |= spmm_x_bit(type);
        }
    }

    void run_rows(FeatureView x, DenseView<float> y, RowRange rows, bool add)
    {
        if (!detail::check_feature_operands(x, y, rows, num_rows_, num_cols_, max_dim_)) {
            return;  // nothing to compute, and the model wants a width of at least 1
        }
        HALO_EXPECTS((x_types_ & spmm_x_bit(x.type)) != 0, "cost-model SpMM plan run with ",
                     to_string(x.type), " X, which its request (x_types) did not ask for");
        const auto choice = choose(x.cols, x.type);
        std::size_t k = slot(choice.kernel);
        if (plans_[k] == nullptr) {
            k = slot(fallback_kernel(x.type));  // the kernel rejected the operator (notes_)
        }
        SpmmPlan& plan = *plans_[k];
        FeatureSpmmPlan* features = as_feature_plan(plan);
        HALO_EXPECTS(x.type == FeatureType::fp32 || features != nullptr, "the cost model ran ",
                     plan.algorithm(), " on ", to_string(x.type), " X, which it does not read");
        // Column slices: the kernel once per slice of X's and y's columns (the sums of one
        // element do not depend on the other columns).
        const auto slice =
            k == slot(choice.kernel) && choice.column_slice > 0 ? choice.column_slice : x.cols;
        const auto bytes = static_cast<std::int64_t>(feature_bytes(x.type));
        for (std::int64_t c0 = 0; c0 < x.cols; c0 += slice) {
            const auto w = std::min(slice, x.cols - c0);
            const FeatureView xs{static_cast<const char*>(x.data) + c0 * bytes, x.type, x.rows, w,
                                 x.ld};
            const DenseView<float> ys{y.data + c0, y.rows, w, y.ld};
            const DenseView<const float> xf{static_cast<const float*>(xs.data), x.rows, w, x.ld};
            if (add) {
                plan.run_add(xf, ys, rows);  // fp32 only (run_add above)
            } else if (features != nullptr) {
                features->run_features(xs, ys, rows);
            } else {
                plan.run(xf, ys, rows);
            }
        }
        last_ = k;
        last_slice_ = slice < x.cols ? slice : 0;
        const auto key = std::make_pair(x.cols, x.type);
        if (decisions_.find(key) == decisions_.end()) {
            auto text = describe(shape_, x.cols, choice);
            if (x.type != FeatureType::fp32) {
                text += ", " + to_string(x.type) + " X";
            }
            if (k != slot(choice.kernel)) {
                text += ", ran " + to_string(static_cast<ModeledKernel>(k));
            }
            decisions_.emplace(key, std::move(text));
        }
    }

    // The model's choice, without L2 hints unless the request asked for them.
    ModeledChoice choose(std::int64_t width, FeatureType type) const
    {
        auto c = spmm_cost_model(shape_, width, cache_bytes_, zeroing_overlapped_, form_, type);
        c.l2_hints = c.l2_hints && l2_hints_;
        return c;
    }

    // MergePath with the model's cost and hints; every other kernel through its registry entry,
    // in the operator's form (the model picked a kernel that takes it).
    static std::unique_ptr<SpmmPlan> build(Context& ctx, const Csr& a,
                                           const SpmmPlanRequest& request,
                                           const OperatorScaling* scaling, ModeledKernel kernel,
                                           const MergePathOptions& mergepath)
    {
        if (kernel == ModeledKernel::mergepath) {
            auto options = mergepath;
            options.scaled_form = scaled_form(request);
            return make_mergepath_spmm_plan(ctx, a, request.max_dim, options, scaling);
        }
        const auto& entry = registry_entry(kernel);
        const auto form = spmm_form(scaling, request.pattern_operators);
        HALO_EXPECTS(entry.takes(form) && entry.make != nullptr &&
                         (scaling == nullptr || entry.make_scaled != nullptr),
                     "the cost model picked ", entry.name, ", which does not take operators as ",
                     to_string(form));
        auto plan = scaling != nullptr ? entry.make_scaled(ctx, a, request, *scaling)
                                       : entry.make(ctx, a, request);
        HALO_EXPECTS(plan != nullptr, entry.name, " declined an operator as ", to_string(form),
                     ", a form its registry entry takes");
        return plan;
    }

    std::int64_t num_rows_ = 0;
    std::int64_t num_cols_ = 0;
    std::int64_t max_dim_ = 0;
    OperatorShape shape_;
    std::int64_t cache_bytes_ = 0;     // the device's L2, for the column-slice rule
    bool zeroing_overlapped_ = false;  // the device's, for the chunked row-split's rule
    bool l2_hints_ = false;         // SpmmPlanRequest::l2_hints
    SpmmForm form_;                 // the operator's form: the model picks kernels that take it
    unsigned x_types_;              // SpmmXType bits: the X types run() may be given
    std::array<std::unique_ptr<SpmmPlan>, kKernels> plans_;
    std::size_t last_ = kKernels;  // the kernel of the last run; kKernels before any
    std::int64_t last_slice_ = 0;  // its column slice (0: whole rows)
    // Per width and X type, the model's decision in words.
    std::map<std::pair<std::int64_t, FeatureType>, std::string> decisions_;
    std::vector<std::string> notes_;
};

}  // namespace

std::unique_ptr<SpmmPlan> make_modeled_spmm_plan(Context& ctx, const Csr& a,
                                                 const SpmmPlanRequest& request,
                                                 const OperatorScaling* scaling)
{
    validate(a, "the operator of a cost-model SpMM plan");
    return std::make_unique<ModeledSpmmPlan>(ctx, a, request, scaling);
}

}  // namespace halo::cuda
