// 16-bit activations stored in 16 bits (docs/KERNELS.md "Storage in 16 bits"): the work buffers
// hold the activation type two elements per word, the exchange moves those words, the SpMM
// plans gather 16-bit rows (run_features) and the GEMMs read them (gemm_features); what a kernel
// writes in fp32 (an SpMM's sums, a GEMM before its bias) goes through an fp32 scratch into
// Backend::store_features, which rounds as the definition rounds. So a packed run computes
// what the same run with its stores rounded in fp32 memory computes (bit for bit on the CPU
// backend), in half the bytes.
#include <algorithm>
#include <string>

#include "halo/core/error.hpp"
#include "halo/core/layer_type.hpp"
#include "layer_step.hpp"

namespace halo::detail {

void StepContext::decide_storage()
{
    packed_ = false;
    storage_note_.clear();
    const auto type = options.activations;
    if (type == FeatureType::fp32) {
        return;
    }
    const auto rounded = "--activations " + to_string(type) + ": rounded in fp32 memory (";
    if (!options.store_16bit) {
        storage_note_ = rounded + "EngineOptions::store_16bit off)";
        return;
    }
    if (!backend.stores_16bit()) {
        storage_note_ = rounded + "the " + backend.name() + " backend stores no 16-bit matrices)";
        return;
    }
    // A layer type that reads fp32 rows widens its input and stores its output
    // (Engine::Impl::forward_widened); the note names the first.
    std::string widened;
    for (std::size_t l = 0; l < model.layers.size() && widened.empty(); ++l) {
        const auto& layer = model.layers[l];
        if (!layer_kind(layer.type).packs_16bit) {
            widened = "; layer " + std::to_string(l) + " (" + to_string(layer.type) +
                      ") widens its input to fp32";
        }
    }
    for (const auto& [kind, plan] : spmm_) {
        const auto split = split_.find(kind);
        const bool reads = plan->reads_features(type) &&
                           (split == split_.end() || (split->second.local->reads_features(type) &&
                                                      split->second.halo->reads_features(type)));
        if (!reads) {
            storage_note_ = rounded + "the " + to_string(kind) + " operator's SpMM " +
                            plan->algorithm() + " gathers fp32 rows only)";
            return;
        }
    }
    packed_ = true;
    storage_note_ = "--activations " + to_string(type) + ": stored in 16 bits" + widened;
    scratch_ = backend.allocate(std::max<std::int64_t>(n_owned, 1),
                                std::max<std::int64_t>(model.max_dim(), 1));
}

MutableFeatureView StepContext::fview(int k, std::int64_t rows, std::int64_t cols)
{
    HALO_EXPECTS(packed_, "a 16-bit view of a work buffer without 16-bit storage");
    const auto type = options.activations;
    // The words of the view lie within those of an fp32 view of the same rows (view() checks
    // the buffer's width and allocates it).
    const auto words = view(k, rows, feature_words(type, cols));
    return packed_view(words.data, type, rows, cols);
}

DenseView<float> StepContext::scratch(std::int64_t rows, std::int64_t cols)
{
    HALO_EXPECTS(rows >= 0 && cols >= 0 && rows <= scratch_.rows() && cols <= scratch_.cols(),
                 "a ", rows, " x ", cols, " view of the fp32 scratch (", scratch_.rows(), " x ",
                 scratch_.cols(), ")");
    return {scratch_.data(), rows, cols, cols};
}

void StepContext::gemm_features(FeatureView a, const Matrix& w, MutableFeatureView c, float beta)
{
    const auto type = options.activations;
    auto found = packed_weights_.find(w.data());
    if (found == packed_weights_.end()) {
        // The weights were rounded to the type at upload (LayerWeights): exact in 16 bits.
        auto words = backend.allocate(w.rows(), feature_words(type, w.cols()));
        const auto store = store_tag();
        raise_if(backend.store_features(w.view(), nullptr, Activation::none,
                                        packed_view(words.data(), type, w.rows(), w.cols()),
                                        store));
        found = packed_weights_.emplace(w.data(), std::move(words)).first;
    }
    const FeatureView b = packed_view(found->second.data(), type, w.rows(), w.cols());
    raise_if(backend.gemm_features(a, b, c, store_tag(), beta));
}

void StepContext::store_features(DenseView<const float> src, const Matrix& bias, Activation act,
                                 MutableFeatureView dst)
{
    raise_if(backend.store_features(src, bias.data(), act, dst, store_tag()));
}

}  // namespace halo::detail
