// Input features uploaded to a backend while the rest of a part is read (docs/ENGINE.md, "Input
// features"): read_shard hands the feature rows over in groups on a thread of its own
// (ShardReadOptions::features) while it reads the graph, and a FeatureUpload copies each group
// into one backend matrix, so that the upload overlaps the read instead of following it.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "halo/core/feature_rows.hpp"
#include "halo/kernels_host/backend.hpp"

namespace halo {

class FeatureUpload {
public:
    /// Uploads float32 feature rows to `backend` as long as the whole matrix takes at most
    /// `max_bytes` of its memory; a larger matrix, or int8 rows (an int8 dataset), is not
    /// uploaded (declined() says why) and the caller uploads from the shard as before. The
    /// backend must outlive this object.
    FeatureUpload(Backend& backend, std::int64_t max_bytes);

    /// The ShardReadOptions::features callback (halo_store). Each group is copied into its rows of
    /// one total_rows x cols backend matrix, allocated at the first group; the groups may come in
    /// any order but must agree on total_rows, cols and int8. Binds the calling thread to the
    /// backend's device first (Backend::bind_thread).
    void operator()(const FeatureRowsRead& group);
    FeatureRows callback()
    {
        return [this](const FeatureRowsRead& group) { (*this)(group); };
    }

    /// After the read: the uploaded rows x cols matrix when every one of `rows` rows arrived, and
    /// nullopt when the upload was declined, no group came, or rows are missing (then
    /// declined() says so). The matrix leaves this object; a second call is a LogicError.
    std::optional<Matrix> take(std::int64_t rows, std::int64_t cols);

    /// Why nothing was uploaded (empty when something was).
    const std::string& declined() const { return declined_; }
    /// Bytes copied and the wall time the copies took on the reader's thread.
    std::int64_t bytes() const { return bytes_; }
    double seconds() const { return seconds_; }

private:
    Backend& backend_;
    std::int64_t max_bytes_;
    std::mutex mutex_;
    Matrix matrix_;
    bool allocated_ = false;
    bool taken_ = false;
    bool bound_ = false;
    std::int64_t rows_arrived_ = 0;
    std::int64_t bytes_ = 0;
    double seconds_ = 0.0;
    std::string declined_;
};

}  // namespace halo
