#include "row_block_driver.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "halo/core/error.hpp"
#include "layer_step.hpp"

namespace halo::detail {
namespace {

constexpr std::int64_t f32 = sizeof(float);
// A resident z comes up in about this many pieces (each at least kMinUploadChunkBytes), each
// scaled while the next ones arrive (start_upload, finish_upload).
constexpr std::int64_t kUploadChunks = 16;
constexpr std::int64_t kMinUploadChunkBytes = std::int64_t{64} << 20;

}  // namespace


// Host matrices are allocated once per slot and reused (page-locking is slow: it must not
// happen per layer or per run); a matrix shares its slot's storage.
Matrix RowBlockDriver::host_matrix(std::int64_t rows, std::int64_t cols, int slot)
{
    auto& cached = host_cache_[static_cast<std::size_t>(slot)];
    const auto need = std::max<std::int64_t>(rows * cols, 1);
    if (!cached || cached->rows() < need) {
        cached.reset();
        cached = std::make_shared<Matrix>(backend_.allocate_host(need, 1));
    }
    return Matrix(std::shared_ptr<float>(cached, cached->data()), rows, cols);
}

void RowBlockDriver::down(const Matrix& m, float* host, LayerTiming& t)
{
    if (m.rows() > 0 && m.cols() > 0) {
        const auto t0 = std::chrono::steady_clock::now();
        backend_.copy_to_host(m.view(), host);
        t.transfer += seconds_since(t0);
        t.transferred_bytes += f32 * m.rows() * m.cols();
    }
}

// z = x W and the step's epilogue on `rows` rows in backend memory (maxk: + b; linear: the
// whole layer), timed as dense work with --step-timing.
void RowBlockDriver::transform(const BlockStep& step, DenseView<const float> x, DenseView<float> z,
                               std::int64_t rows, LayerTiming& t)
{
    const auto t0 = std::chrono::steady_clock::now();
    backend_.gemm(x, step.weights().weight.view(), z, 1.0f, 0.0f);
    step.transform_epilogue(backend_, z, rows);
    if (ctx_.options.step_timing) {
        backend_.synchronize();
        t.dense += seconds_since(t0);
    }
}

// z rows = x rows W and the step's epilogue (linear: the whole layer, into its output).
void RowBlockDriver::run_pre(std::size_t l, const Matrix& x, const Matrix& z, LayerTiming& t)
{
    const auto in_w = model_.layers[l].in_dim;
    const auto wz = z.cols();
    for (const auto& b : plans_[l].pre_blocks) {
        const auto r = b.rows.size();
        auto xb = upload_timed(backend_, x.data() + b.rows.begin * in_w, r, in_w, t);
        auto zb = backend_.allocate(r, wz);
        transform(*steps_[l], xb.view(), zb.view(), r, t);
        down(zb, z.data() + b.rows.begin * wz, t);
    }
}

// Starts the exchange of z's halo rows; true when it is left in flight (to overlap the interior
// blocks: where the exchanger works on the host matrix itself), false when it is complete.
bool RowBlockDriver::exchange_start(const Matrix& z, std::int64_t width, LayerTiming& t)
{
    t.fp32_exchange_bytes +=
        (shard_.plan.num_send() + shard_.plan.num_recv()) * width * static_cast<std::int64_t>(f32);
    if (!ctx_.has_peers) {
        return false;
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (backend_.uses_host_memory()) {
        exchanger_.start(z.view());
        t.exchange += seconds_since(t0);
        if (ctx_.options.overlap) {
            return true;
        }
        exchange_finish(t);
    } else {
        // The exchanger works on backend memory: owned rows go up, halo rows come down.
        const auto w = z.cols();
        HALO_EXPECTS(f32 * n_total_ * w <= limit_, "the halo exchange of a ", n_total_, " x ", w,
                     " matrix does not fit the device memory limit of ", format_bytes(limit_));
        auto all = backend_.allocate(n_total_, w);
        backend_.copy_from_host(z.data(), all.rows_view(0, n_owned_));
        exchanger_.start(all.view());
        exchanger_.finish();
        backend_.synchronize();
        backend_.copy_to_host(all.rows_view(n_owned_, n_total_), z.data() + n_owned_ * w);
        t.transferred_bytes += f32 * n_total_ * w;
        t.exchange += seconds_since(t0);
    }
    return false;
}

void RowBlockDriver::exchange_finish(LayerTiming& t)
{
    const auto t0 = std::chrono::steady_clock::now();
    exchanger_.finish();
    const double waited = seconds_since(t0);
    t.exchange += waited;
    t.waiting += waited;
}

void RowBlockDriver::run_aggregation(std::size_t l, const Matrix& x, const Matrix& z,
                                     const Matrix& out, bool exchanging, LayerTiming& t)
{
    const auto& p = plans_[l];
    const auto& a = *p.op;
    const auto out_w = model_.layers[l].out_dim;
    const auto wz = p.wz;
    Matrix z_all;  // all of z, when resident
    if (!p.compact) {
        // Halo rows still in flight come up when they arrive (arrive() below).
        const auto rows = exchanging ? n_owned_ : n_total_;
        z_all = backend_.allocate(n_total_, wz);
        const auto t0 = std::chrono::steady_clock::now();
        backend_.copy_from_host(z.data(), z_all.rows_view(0, rows));
        t.transfer += seconds_since(t0);
        t.transferred_bytes += f32 * rows * wz;
    }
    std::vector<std::int64_t> position(p.compact ? stamp_.size() : 0, -1);
    // The halo rows are needed from the first block with a boundary row on (split() keeps
    // interior rows in blocks of their own): complete the exchange there, and refresh the halo
    // rows of a resident z, uploaded before they arrived.
    auto arrive = [&] {
        if (!exchanging) {
            return;
        }
        exchanging = false;
        exchange_finish(t);
        if (!p.compact && n_total_ > n_owned_) {
            const auto t0 = std::chrono::steady_clock::now();
            backend_.copy_from_host(z.data() + n_owned_ * wz, z_all.rows_view(n_owned_, n_total_));
            t.transfer += seconds_since(t0);
            t.transferred_bytes += f32 * (n_total_ - n_owned_) * wz;
        }
    };
    for (const auto& blk : p.agg_blocks) {
        if (blk.rows.end > shard_.num_interior) {
            arrive();
        }
        const auto r = blk.rows.size();
        // The block's rows of the operator; gathered columns renumbered in ascending order.
        Csr block = slice_rows(a, blk.rows);
        std::vector<local_id> cols;
        Matrix src;
        if (p.compact) {
            // Referenced columns in ascending order: mark, then scan (O(N + nnz), no sort).
            const auto nnz = static_cast<std::int64_t>(block.indices.size());
#pragma omp parallel for schedule(static)
            for (std::int64_t k = 0; k < nnz; ++k) {
                position[static_cast<std::size_t>(block.indices[k])] = 0;
            }
            for (std::int64_t c = 0; c < n_total_; ++c) {
                if (position[static_cast<std::size_t>(c)] == 0) {
                    position[static_cast<std::size_t>(c)] = static_cast<std::int64_t>(cols.size());
                    cols.push_back(static_cast<local_id>(c));
                }
            }
#pragma omp parallel for schedule(static)
            for (std::int64_t k = 0; k < nnz; ++k) {
                block.indices[k] =
                    static_cast<local_id>(position[static_cast<std::size_t>(block.indices[k])]);
            }
            block.num_cols = static_cast<std::int64_t>(cols.size());
            auto staged = host_matrix(block.num_cols, wz, kStagingSlot);
            const auto ncols = block.num_cols;
#pragma omp parallel for schedule(static)
            for (std::int64_t c = 0; c < ncols; ++c) {
                std::memcpy(staged.data() + c * wz, z.data() + std::int64_t{cols[c]} * wz,
                            static_cast<std::size_t>(wz) * sizeof(float));
            }
            src = upload_timed(backend_, staged.data(), block.num_cols, wz, t);
        } else {
            block.num_cols = n_total_;
            src = z_all;
        }
        auto o = backend_.allocate(r, out_w);
        BlockRun run{backend_,
                     block,
                     src,
                     {0, r},
                     blk.rows.begin,
                     x.data(),
                     z.data(),
                     o,
                     ctx_.options.attention,
                     model_.max_dim(),
                     ctx_.options.step_timing,
                     t};
        steps_[l]->aggregate(run);
        down(o, out.data() + blk.rows.begin * out_w, t);
        if (p.compact) {
            for (const auto c : cols) {
                position[static_cast<std::size_t>(c)] = -1;
            }
        }
    }
    arrive();  // a part without boundary rows still completes its exchange
}

// All of z resident on the backend: the transform blocks write their rows of z there (or the
// input's owned rows go up when the layer aggregates first), the halo exchange runs on it in
// place while the interior blocks run, and the aggregation blocks stream the operator's rows
// (block b + 1's copy queued before block b runs) and download their outputs asynchronously.
void RowBlockDriver::run_resident(std::size_t l, const Matrix& x, const Matrix& out,
                                  const Matrix* z_in, const Matrix* z_next, LayerTiming& t)
{
    const auto& p = plans_[l];
    const auto& step = *steps_[l];
    const auto in_w = model_.layers[l].in_dim;
    const auto out_w = model_.layers[l].out_dim;
    const auto wz = p.wz;
    auto& streamed = *streamed_.at(p.op);
    const auto copied_before = streamed.copied_bytes();
    auto z = backend_.allocate(n_total_, wz);
    // Where the blocks read z scaled by the column scalings (no peers: z is whole here), each
    // piece of z is scaled once it is in.
    auto* scale = streamed.scaled_input() ? &streamed : nullptr;
    if (z_in != nullptr) {
        // The previous layer's blocks made z's owned rows: those they kept on the backend (the
        // last kept_.rows()) are copied there while the others come up.
        const auto kept = kept_.rows();
        const auto up = n_owned_ - kept;
        const auto chunks = start_upload(z_in->data(), z, {0, up}, t);
        if (kept > 0) {
            backend_.axpby(1.0f, kept_.view(), 0.0f, z.rows_view(up, n_owned_));
            if (scale != nullptr) {
                scale->scale_input(z.view(), {up, n_owned_});
            }
        }
        finish_upload(chunks, z, scale, t);
        kept_ = Matrix();
    } else if (!p.agg_first) {
        for (const auto& b : p.pre_blocks) {
            const auto r = b.rows.size();
            auto xb = upload_timed(backend_, x.data() + b.rows.begin * in_w, r, in_w, t);
            transform(step, xb.view(), z.rows_view(b.rows.begin, b.rows.end), r, t);
        }
        if (scale != nullptr) {
            scale->scale_input(z.view(), {0, n_total_});
        }
    } else {
        finish_upload(start_upload(x.data(), z, {0, n_owned_}, t), z, scale, t);
    }
    t.fp32_exchange_bytes +=
        (shard_.plan.num_send() + shard_.plan.num_recv()) * wz * static_cast<std::int64_t>(f32);
    bool exchanging = false;
    if (ctx_.has_peers) {
        const auto t0 = std::chrono::steady_clock::now();
        exchanger_.start(z.view());
        t.exchange += seconds_since(t0);
        exchanging = true;
        if (!ctx_.options.overlap) {
            exchanging = false;
            exchange_finish(t);
        }
    }
    // The next z's rows from keep_begin on stay here (plan_fusion) instead of going down.
    const auto keep_begin = n_owned_ - (z_next != nullptr ? p.keep_rows : 0);
    if (z_next != nullptr && p.keep_rows > 0) {
        kept_ = backend_.allocate(p.keep_rows, z_next->cols());
    }
    const auto& blocks = p.agg_blocks;
    if (!blocks.empty()) {
        streamed.prefetch(blocks.front().rows);
    }
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        const auto& blk = blocks[i];
        if (exchanging && blk.rows.end > shard_.num_interior) {
            exchanging = false;
            exchange_finish(t);
        }
        if (i + 1 < blocks.size()) {
            streamed.prefetch(blocks[i + 1].rows);
        }
        const auto r = blk.rows.size();
        auto o = backend_.allocate(r, out_w);
        BlockRun run{backend_,
                     no_block_,
                     z,
                     {0, r},
                     blk.rows.begin,
                     x.data(),
                     nullptr,
                     o,
                     ctx_.options.attention,
                     model_.max_dim(),
                     ctx_.options.step_timing,
                     t};
        run.streamed = &streamed;
        step.aggregate(run);
        if (z_next != nullptr) {  // the next layer's transform of these rows, sent instead
            const auto wn = z_next->cols();
            // Rows before keep_begin go down; the others are written where they stay.
            const auto down_rows = std::clamp(keep_begin - blk.rows.begin, std::int64_t{0}, r);
            if (down_rows > 0) {
                auto zn = backend_.allocate(down_rows, wn);
                transform(*steps_[l + 1], o.rows_view(0, down_rows), zn.view(), down_rows, t);
                const auto t0 = std::chrono::steady_clock::now();
                backend_.download_async(zn, z_next->data() + blk.rows.begin * wn);
                t.transfer += seconds_since(t0);
                t.transferred_bytes += f32 * down_rows * wn;
            }
            if (down_rows < r) {
                const auto first = blk.rows.begin + down_rows - keep_begin;
                transform(*steps_[l + 1], o.rows_view(down_rows, r),
                          kept_.rows_view(first, first + r - down_rows), r - down_rows, t);
            }
            continue;
        }
        const auto t0 = std::chrono::steady_clock::now();
        backend_.download_async(o, out.data() + blk.rows.begin * out_w);
        t.transfer += seconds_since(t0);
        t.transferred_bytes += f32 * r * out_w;
    }
    if (exchanging) {  // a part without boundary rows still completes its exchange
        exchange_finish(t);
    }
    const auto t0 = std::chrono::steady_clock::now();
    backend_.finish_downloads();
    t.transfer += seconds_since(t0);
    t.transferred_bytes += streamed.copied_bytes() - copied_before;
}

// Rows `rows` of z from host rows at `host` (row rows.begin first), in pieces copied back to
// back (Backend::upload_async: on the CUDA backend beside the compute stream's work); returns
// the pieces for finish_upload.
std::vector<RowRange> RowBlockDriver::start_upload(const float* host, const Matrix& z,
                                                   RowRange rows, LayerTiming& t)
{
    std::vector<RowRange> chunks;
    const auto w = z.cols();
    if (rows.empty() || w == 0) {
        return chunks;
    }
    const auto step = std::max((rows.size() + kUploadChunks - 1) / kUploadChunks,
                               std::max<std::int64_t>(kMinUploadChunkBytes / (f32 * w), 1));
    const auto t0 = std::chrono::steady_clock::now();
    try {
        for (auto b = rows.begin; b < rows.end; b += step) {
            const RowRange c{b, std::min(b + step, rows.end)};
            chunks.push_back(c);  // the backend queues an entry even where the copy fails
            backend_.upload_async(host + (c.begin - rows.begin) * w, z.rows_view(c.begin, c.end));
        }
    } catch (...) {  // take every queued entry, so that the next upload's waits are its own
        for (std::size_t i = 0; i < chunks.size(); ++i) {
            try {
                backend_.wait_upload();
            } catch (...) {  // the first error is the one reported
            }
        }
        throw;
    }
    t.transfer += seconds_since(t0);
    t.transferred_bytes += f32 * rows.size() * w;
    return chunks;
}

// Orders the work issued next after the pieces of start_upload, each scaled by the streamed
// operator's column scalings (where `scale` is given) as soon as it is in, while the next
// pieces still arrive.
void RowBlockDriver::finish_upload(const std::vector<RowRange>& chunks, const Matrix& z,
                                   StreamedSpmm* scale, LayerTiming& t)
{
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& c : chunks) {
        backend_.wait_upload();
        if (scale != nullptr) {
            scale->scale_input(z.view(), c);
        }
    }
    t.transfer += seconds_since(t0);
}

float* RowBlockDriver::input()
{
    return host_matrix(n_total_, model_.input_dim(), 0).data();
}

std::span<const float> RowBlockDriver::run(std::vector<LayerTiming>& timings,
                                           std::vector<std::vector<float>>* keep)
{
    timings.assign(model_.layers.size(), {});
    kept_ = Matrix();  // a run that threw between two layers may have left it
    int in_slot = 0;
    Matrix h = host_matrix(n_total_, model_.input_dim(), in_slot);
    // z of the current layer made by the previous layer's blocks (plan_fusion), or empty.
    Matrix z_in;
    for (std::size_t l = 0; l < model_.layers.size(); ++l) {
        const auto& layer = model_.layers[l];
        const auto& p = plans_[l];
        auto& t = timings[l];
        const auto t0 = std::chrono::steady_clock::now();
        const auto stats_before = exchanger_.stats();
        // A layer whose blocks send the next layer's z rows instead of their output writes no
        // output (the next layer reads only that z): no page-locked matrix for it.
        const bool fuse = p.op != nullptr && !p.compact && fused_[l] && keep == nullptr;
        auto out = fuse ? Matrix() : host_matrix(n_total_, layer.out_dim, 1 - in_slot);
        if (p.op == nullptr) {  // linear: the transform is the layer
            run_pre(l, h, out, t);
        } else if (!p.compact) {
            // Layer l + 1's z rows, where this layer's blocks make them, read by layer l + 1
            // only (not the slot of z_in: the next layer reads that one while writing this).
            Matrix z_next;
            if (fuse) {
                z_next = host_matrix(n_total_, plans_[l + 1].wz,
                                     kFusedSlot + static_cast<int>(l % 2));
            }
            run_resident(l, h, out, z_in.data() != nullptr ? &z_in : nullptr,
                         fuse ? &z_next : nullptr, t);
            z_in = std::move(z_next);
        } else {
            const auto z = p.agg_first ? h : host_matrix(n_total_, p.wz, kTransformSlot);
            if (!p.agg_first) {
                run_pre(l, h, z, t);
            }
            const bool exchanging = exchange_start(z, p.wz, t);
            run_aggregation(l, h, z, out, exchanging, t);
        }
        backend_.synchronize();
        t.total = seconds_since(t0);
        t.compute = t.spmm + t.dense;
        t.row_blocks =
            static_cast<std::int64_t>(std::max(p.pre_blocks.size(), p.agg_blocks.size()));
        t.exchanged_bytes = (exchanger_.stats().bytes_sent - stats_before.bytes_sent) +
                            (exchanger_.stats().bytes_received - stats_before.bytes_received);
        if (keep != nullptr) {
            keep->emplace_back(out.data(), out.data() + n_owned_ * layer.out_dim);
        }
        if (p.op == nullptr || p.compact) {
            z_in = Matrix();
        }
        h = std::move(out);
        in_slot = 1 - in_slot;
    }
    return {h.data(), static_cast<std::size_t>(n_owned_ * model_.output_dim())};
}

}  // namespace halo::detail
