#include "halo/engine/feature_upload.hpp"

#include <chrono>

#include "halo/core/error.hpp"

namespace halo {

FeatureUpload::FeatureUpload(Backend& backend, std::int64_t max_bytes)
    : backend_(backend), max_bytes_(max_bytes)
{
}

void FeatureUpload::operator()(const FeatureRowsRead& group)
{
    const std::lock_guard lock(mutex_);
    if (!declined_.empty()) {
        return;
    }
    HALO_EXPECTS(group.first_row >= 0 && group.count >= 0 &&
                     group.first_row + group.count <= group.total_rows && group.cols >= 0,
                 "feature rows [", group.first_row, ", ", group.first_row + group.count,
                 ") of a ", group.total_rows, " x ", group.cols, " matrix");
    if (group.int8) {
        declined_ = "int8 features (dequantized after the read)";
        return;
    }
    HALO_EXPECTS(!taken_, "feature rows after the upload was taken");
    if (!allocated_) {
        const auto bytes = group.total_rows * group.cols * std::int64_t{4};
        if (bytes > max_bytes_) {
            declined_ = "features of " + std::to_string(bytes) + " bytes exceed the " +
                        std::to_string(max_bytes_) + " bytes set aside for them";
            return;
        }
        if (!bound_) {
            backend_.bind_thread();
            bound_ = true;
        }
        // The upload is an optimization: memory the backend cannot give leaves the features to
        // the upload after the read.
        try {
            matrix_ = backend_.allocate(group.total_rows, group.cols);
        } catch (const Error& e) {
            declined_ = "the backend could not allocate them: " + e.message();
            return;
        }
        allocated_ = true;
    }
    HALO_EXPECTS(group.total_rows == matrix_.rows() && group.cols == matrix_.cols(),
                 "a feature group of a ", group.total_rows, " x ", group.cols,
                 " matrix after one of ", matrix_.rows(), " x ", matrix_.cols());
    if (group.count == 0 || group.cols == 0) {
        return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    backend_.copy_from_host(static_cast<const float*>(group.rows),
                            matrix_.rows_view(group.first_row, group.first_row + group.count));
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rows_arrived_ += group.count;
    bytes_ += group.count * group.cols * std::int64_t{4};
}

std::optional<Matrix> FeatureUpload::take(std::int64_t rows, std::int64_t cols)
{
    const std::lock_guard lock(mutex_);
    HALO_EXPECTS(!taken_, "the uploaded features were taken already");
    if (!declined_.empty()) {
        return std::nullopt;
    }
    if (!allocated_) {
        declined_ = "no feature rows were read";
        return std::nullopt;
    }
    if (matrix_.rows() != rows || matrix_.cols() != cols || rows_arrived_ != rows) {
        declined_ = "uploaded " + std::to_string(rows_arrived_) + " rows of a " +
                    std::to_string(matrix_.rows()) + " x " + std::to_string(matrix_.cols()) +
                    " matrix, expected " + std::to_string(rows) + " x " + std::to_string(cols);
        matrix_ = Matrix();
        return std::nullopt;
    }
    taken_ = true;
    auto out = std::move(matrix_);
    matrix_ = Matrix();
    return out;
}

}  // namespace halo
