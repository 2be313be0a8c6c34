#include <cmath>
#include <cstring>

#include "halo/core/error.hpp"
#include "halo/core/kernel_metadata.hpp"
#include "layer_step.hpp"

namespace halo::detail {

StepContext::StepContext(Backend& b, HaloExchanger& e, const Shard& s, const Model& m,
                         const EngineOptions& o)
    : backend(b),
      exchanger(e),
      shard(s),
      model(m),
      options(o),
      n_owned(s.num_owned),
      n_total(s.num_owned + s.num_halo),
      has_peers(!s.plan.send_ranks.empty() || !s.plan.recv_ranks.empty()),
      rows_moved_(s.plan.num_send() + s.plan.num_recv())
{
}

void StepContext::ensure_degrees()
{
    if (options.dataset_normalization == "gcn" || !degree_.empty()) {
        return;
    }
    // Owned gcn degrees, then the halo ones through one exchange of a width-1 matrix.
    degree_ = gcn_degrees(shard);
    degree_.resize(n_total, 0.0f);
    auto column = exchangeable(1);
    backend.copy_from_host(degree_.data(), column.view());
    exchanger.start(column.view());
    exchanger.finish();
    backend.copy_to_host(column.view(), degree_.data());
}

const Csr& StepContext::operator_matrix(Aggregation kind)
{
    auto found = matrices_.find(kind);
    if (found != matrices_.end()) {
        return found->second;
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (kind == Aggregation::gcn) {
        ensure_degrees();
    }
    auto& a = matrices_[kind] =
        make_aggregation(shard, kind, options.dataset_normalization, degree_);
    operator_seconds_ += seconds_since(t0);
    return a;
}

const Csr& StepContext::operator_pattern(Aggregation kind)
{
    if (kind != Aggregation::gcn) {
        return shard.csr;  // mean and sum: the stored adjacency's pattern
    }
    if (!gcn_pattern_) {
        const auto t0 = std::chrono::steady_clock::now();
        gcn_pattern_ = gcn_pattern(shard);
        operator_seconds_ += seconds_since(t0);
    }
    return *gcn_pattern_;
}

std::optional<OperatorScaling> StepContext::operator_scaling(Aggregation kind)
{
    // Scalings exist for the operators the engine derives from an unweighted adjacency.
    if (shard.csr.has_values() || options.dataset_normalization != "none" ||
        kind == Aggregation::sum) {
        return std::nullopt;
    }
    const auto t0 = std::chrono::steady_clock::now();
    OperatorScaling s;
    if (kind == Aggregation::gcn) {
        // a[i, j] = 1 / sqrt(d_i d_j) (make_aggregation): d^-1/2 on both sides.
        ensure_degrees();
        HALO_EXPECTS(static_cast<std::int64_t>(degree_.size()) == n_total, "gcn degrees of ",
                     degree_.size(), " columns, expected ", n_total);
        s.col.resize(static_cast<std::size_t>(n_total));
#pragma omp parallel for schedule(static)
        for (std::int64_t j = 0; j < n_total; ++j) {
            s.col[j] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(degree_[j])));
        }
        s.row.assign(s.col.begin(), s.col.begin() + n_owned);
    } else {
        // mean: a[i, j] = 1 / (stored neighbours of i).
        const auto& a = shard.csr;
        s.row.resize(static_cast<std::size_t>(a.num_rows));
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < a.num_rows; ++i) {
            const auto nnz = a.row_nnz(i);
            s.row[i] = nnz > 0 ? static_cast<float>(1.0 / static_cast<double>(nnz)) : 0.0f;
        }
    }
    operator_seconds_ += seconds_since(t0);
    return s;
}

namespace {

// The entries of a's rows whose column is local (< n_owned) or a halo column (>= n_owned), in
// their order, as a matrix of a's shape.
Csr column_block(const Csr& a, std::int64_t n_owned, bool halo)
{
    Csr out;
    out.num_rows = a.num_rows;
    out.num_cols = a.num_cols;
    out.indptr.assign(static_cast<std::size_t>(a.num_rows) + 1, 0);
    for (std::int64_t r = 0; r < a.num_rows; ++r) {
        for (auto k = a.indptr[r]; k < a.indptr[r + 1]; ++k) {
            if ((a.indices[k] >= n_owned) == halo) {
                out.indices.push_back(a.indices[k]);
                if (a.has_values()) {
                    out.values.push_back(a.values[k]);
                }
            }
        }
        out.indptr[r + 1] = static_cast<offset_t>(out.indices.size());
    }
    return out;
}

DenseView<float> row_range(DenseView<float> v, RowRange rows)
{
    return {v.row(rows.begin), rows.size(), v.cols, v.ld};
}

}  // namespace

bool StepContext::split_overlap() const
{
    const auto mode =
        options.overlap_mode == OverlapMode::automatic
            ? (backend.uses_host_memory() ? OverlapMode::interior : OverlapMode::split)
            : options.overlap_mode;
    return options.overlap && mode == OverlapMode::split && shard.num_halo > 0 &&
           !shard.boundary_rows().empty();
}

SpmmPlan& StepContext::spmm(Aggregation kind)
{
    auto& plan = spmm_[kind];
    if (plan) {
        return *plan;
    }
    auto hints = hints_for(kernel_operator_name(kind));
    // The pattern and its scalings where the backend makes the values itself, else the host's
    // operator with its values.
    std::optional<OperatorScaling> scaling;
    if (options.device_operator_values) {
        scaling = operator_scaling(kind);
    }
    // Boundary rows past the split ones run whole: the whole plan is also asked for them (the
    // pattern and the matrix, whichever a plan is made of, give the same rows).
    const auto end = split_overlap()
                         ? split_end(scaling ? operator_pattern(kind) : operator_matrix(kind))
                         : n_owned;
    if (end > shard.num_interior && end < n_owned) {
        hints.ranges.push_back({end, n_owned});
    }
    const Csr* a = nullptr;
    if (scaling) {
        a = &operator_pattern(kind);
        plan = backend.make_scaled_spmm_plan(*a, hints, *scaling);
        if (!plan) {
            scaling.reset();
        }
    }
    if (!plan) {
        a = &operator_matrix(kind);
        plan = backend.make_spmm_plan(*a, hints);
    }
    plan_operators_[kind] = a;
    if (split_overlap() && plan->exact()) {
        // The stored kernel metadata describes the whole operator: the blocks choose their
        // own (and their tuning is not stored). A sampling plan (AES) keeps the whole rows
        // it samples from, so it is not split.
        const auto t0 = std::chrono::steady_clock::now();
        auto& split = split_[kind];
        split.local_block = column_block(*a, n_owned, false);
        split.halo_block = column_block(*a, n_owned, true);
        operator_seconds_ += seconds_since(t0);
        // Each block in the operator's form: a backend makes a scaled plan wherever its kernel
        // takes the form (SpmmKernel::forms), never by the operator's shape, so a block whose
        // shape differs from the operator's gets one too. A null here is the backend's bug.
        SpmmPlanHints block_hints;
        block_hints.activations = hints.activations;
        auto make = [&](const Csr& block, const char* which) {
            if (!scaling) {
                return backend.make_spmm_plan(block, block_hints);
            }
            auto p = backend.make_scaled_spmm_plan(block, block_hints, *scaling);
            if (p == nullptr) {
                HALO_THROW(LogicError, "the ", backend.name(), " backend made a plan of the ",
                           to_string(kind), " operator as its pattern and scalings (",
                           plan->algorithm(), ") but none of its ", which, " column block (",
                           block.num_rows, " rows, ", block.nnz(), " nonzeros)");
            }
            return p;
        };
        split.local = make(split.local_block, "local");
        split.halo = make(split.halo_block, "halo");
        split.end = end;
    }
    return *plan;
}

// The first boundary rows whose local nonzeros make up split_share of all boundary rows' local
// nonzeros (the matrix and its pattern give the same rows).
std::int64_t StepContext::split_end(const Csr& a) const
{
    const auto share = options.split_share;
    HALO_EXPECTS(share >= 0.0 && share <= 1.0, "split_share ", share, " is outside [0, 1]");
    if (share >= 1.0) {
        return n_owned;
    }
    const auto first = shard.num_interior;
    std::vector<std::int64_t> local(static_cast<std::size_t>(n_owned - first), 0);
#pragma omp parallel for schedule(dynamic, 1024)
    for (std::int64_t i = first; i < n_owned; ++i) {
        std::int64_t count = 0;
        for (auto k = a.indptr[i]; k < a.indptr[i + 1]; ++k) {
            count += a.indices[k] < n_owned ? 1 : 0;
        }
        local[static_cast<std::size_t>(i - first)] = count;
    }
    std::int64_t total = 0;
    for (const auto c : local) {
        total += c;
    }
    const auto target = share * static_cast<double>(total);
    std::int64_t sum = 0;
    auto end = first;
    while (end < n_owned && static_cast<double>(sum) < target) {
        sum += local[static_cast<std::size_t>(end - first)];
        ++end;
    }
    return end;
}

std::size_t StepContext::release_unkept()
{
    std::size_t freed = 0;
    for (auto& [kind, plan] : spmm_) {
        freed += plan->release_unkept();
    }
    for (auto& [kind, split] : split_) {
        freed += split.local->release_unkept() + split.halo->release_unkept();
    }
    return freed;
}

StepContext::SplitOperator* StepContext::split_of(const SpmmPlan& op)
{
    for (auto& [kind, plan] : spmm_) {
        if (plan.get() == &op) {
            const auto found = split_.find(kind);
            return found == split_.end() ? nullptr : &found->second;
        }
    }
    return nullptr;
}

AttentionPlan& StepContext::attention(AttentionPattern pattern)
{
    HALO_EXPECTS(pattern != AttentionPattern::none, "attention over no pattern");
    if (pattern == AttentionPattern::self_loops) {
        if (!self_loop_attention_) {
            const auto t0 = std::chrono::steady_clock::now();
            const auto pattern = self_loop_pattern(shard);
            operator_seconds_ += seconds_since(t0);
            self_loop_attention_ = backend.make_attention_plan(
                pattern, model.max_dim(), options.attention, hints_for(kernel_operator_gcn.data()));
        }
        return *self_loop_attention_;
    }
    if (!adjacency_attention_) {
        if (options.dataset_normalization != "none") {
            HALO_THROW(InputError, "the dataset's adjacency is ", options.dataset_normalization,
                       "-normalized, but a transformer layer attends over the raw "
                       "adjacency (no self-loops); partition with --normalize none");
        }
        adjacency_attention_ =
            backend.make_attention_plan(shard.csr, model.max_dim(), options.attention,
                                        hints_for(kernel_operator_adjacency.data()));
    }
    return *adjacency_attention_;
}

const AttentionPlan* StepContext::attention_plan(AttentionPattern pattern) const
{
    return pattern == AttentionPattern::self_loops  ? self_loop_attention_.get()
           : pattern == AttentionPattern::adjacency ? adjacency_attention_.get()
                                                    : nullptr;
}

const Csr& StepContext::self_loop_matrix()
{
    if (self_loop_matrix_.nnz() == 0) {
        self_loop_matrix_ = self_loop_pattern(shard);
    }
    return self_loop_matrix_;
}

SpmmPlanHints StepContext::hints_for(const std::string& op) const
{
    SpmmPlanHints hints;
    hints.op = op;
    hints.ranges = {{0, shard.num_interior}, {shard.num_interior, shard.num_owned}};
    for (const auto& md : options.kernel_metadata) {
        if (md.op == hints.op) {
            hints.stored.push_back(md);
        }
    }
    // Plans that may read 16-bit activations build their 16-bit kernels (decide_storage).
    if (backend.stores_16bit()) {
        hints.activations = options.activations;
    }
    return hints;
}

void StepContext::allocate_shared()
{
    if (wide_cols_ > 0) {
        wide_ = exchangeable(wide_cols_);
    }
}

Matrix StepContext::exchangeable(std::int64_t cols)
{
    if (has_peers && n_total * cols > 0) {
        if (auto memory = exchanger.allocate(n_total * cols)) {
            return Matrix(std::move(memory), n_total, cols);
        }
    }
    return backend.allocate(n_total, cols);
}

// Buffer k holds n_total * Model::buffer_width floats, allocated on its first use (the first run() allocates
// every buffer a run uses, so that a recording for replay allocates nothing).
void StepContext::gemm(DenseView<const float> a, DenseView<const float> b, DenseView<float> c,
                       float beta)
{
    const auto in_w = model.input_dim();
    if (sparse_input_on_ && beta == 0.0f && a.rows == n_owned && a.cols == in_w && a.ld == in_w &&
        a.data == buffers_[0].data()) {
        sparse_input_->run(b, c, {0, n_owned});
        return;
    }
    backend.gemm(a, b, c, 1.0f, beta);
}

DenseView<float> StepContext::view(int k, std::int64_t rows, std::int64_t cols)
{
    if (buffers_[k].data() == nullptr) {
        buffers_[k] = exchangeable(std::max<std::int64_t>(model.buffer_width(), 1));
    }
    // A view past the buffer would write past its allocation (a maxk layer's records once did:
    // issue 48): every width a step views is in Model::buffer_width.
    HALO_EXPECTS(rows >= 0 && cols >= 0 && rows <= n_total && cols <= buffers_[k].cols(),
                 "a ", rows, " x ", cols, " view of work buffer ", k, " (", buffers_[k].rows(),
                 " x ", buffers_[k].cols(), ")");
    return {buffers_[k].data(), rows, cols, cols};
}

void StepContext::exchange_and_compute(DenseView<float> exchanged, std::int64_t width,
                                       const std::function<void(RowRange)>& compute,
                                       const std::function<void()>& arrived, LayerTiming& t)
{
    // A part without boundary rows (one rank) or interior rows has nothing to run there.
    auto compute_rows = [&](RowRange rows) {
        if (!rows.empty()) {
            compute(rows);
        }
    };
    if (options.overlap) {
        exchange_around(
            exchanged, width, [&] { compute_rows(shard.interior_rows()); }, arrived,
            [&] { compute_rows(shard.boundary_rows()); }, t);
    } else {
        exchange_around(
            exchanged, width, [] {}, arrived,
            [&] {
                compute_rows({0, n_owned});
            },
            t);
    }
}

void StepContext::exchange_around(DenseView<float> exchanged, std::int64_t width,
                                  const std::function<void()>& during,
                                  const std::function<void()>& arrived,
                                  const std::function<void()>& after, LayerTiming& t)
{
    t.fp32_exchange_bytes += rows_moved_ * width * static_cast<std::int64_t>(sizeof(float));
    if (!options.step_timing) {
        // The exchangers order their streams after the compute stream themselves (start)
        // and the compute stream after theirs (finish): no host synchronization is needed,
        // unless asked for (EngineOptions::exchange_barrier).
        // Every rank of a job of several parts meets at the barrier, also one without peers (an
        // all-interior part): skipping it there left the others waiting (issue 48's matrix).
        if (options.exchange_barrier && shard.num_parts > 1) {
            backend.synchronize();
            exchanger.barrier();
        }
        exchanger.start(exchanged);
        during();
        exchanger.finish();
        arrived();
        after();
        return;
    }
    backend.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    exchanger.barrier();  // the peers' late arrival, apart from the exchange's own time
    t.skew += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    exchanger.start(exchanged);
    t.exchange += seconds_since(t0);
    if (options.overlap) {
        t0 = std::chrono::steady_clock::now();
        during();
        backend.synchronize();
        t.spmm += seconds_since(t0);
    }
    t0 = std::chrono::steady_clock::now();
    exchanger.finish();
    // A device exchanger's finish() only orders the streams: wait for the exchange itself, so
    // that `exchange` measures its duration without overlap and `waiting` what the overlapped
    // work left of it.
    backend.synchronize();
    const double waited = seconds_since(t0);
    t.exchange += waited;
    t.waiting += waited;
    t0 = std::chrono::steady_clock::now();
    arrived();
    after();
    backend.synchronize();
    t.spmm += seconds_since(t0);
}

void StepContext::aggregate(SpmmPlan& op, DenseView<float> src, DenseView<float> dst,
                            LayerTiming& t)
{
    aggregate_features(op, feature_view(src), dst, t);
}

// src's words are what the exchange moves (half of fp32's for a 16-bit matrix); the plans read
// src's element type (run_features: run for fp32).
void StepContext::aggregate_features(SpmmPlan& op, MutableFeatureView src, DenseView<float> dst,
                                     LayerTiming& t)
{
    const auto words = words_of(src);
    auto* split = options.overlap ? split_of(op) : nullptr;
    if (split == nullptr) {
        exchange_and_compute(
            words, src.cols, [&](RowRange rows) { op.run_features(src, dst, rows); }, [] {}, t);
        return;
    }
    // A halo plan that adds in place adds the halo columns' sums to dst in one pass; another
    // writes them to a buffer of their own, added to dst after it (y read and written twice
    // more). run_add reads fp32 X only.
    const bool in_place = split->halo->adds_in_place() && src.type == FeatureType::fp32;
    if (!in_place && split->partial.data() == nullptr) {  // the first run allocates (see view())
        split->partial = backend.allocate(n_owned, std::max<std::int64_t>(model.max_dim(), 1));
    }
    // Rows [0, end) split: their local columns during the exchange, the boundary ones' halo
    // columns added after it; the boundary rows from end on whole, after it.
    const RowRange split_rows{shard.num_interior, split->end};
    const RowRange whole_rows{split->end, n_owned};
    exchange_around(
        words, src.cols,
        [&] {
            split->local->run_features(src, dst, {0, split->end});
        },
        [] {},
        [&] {
            if (!split_rows.empty() && in_place) {
                split->halo->run_add(words, dst, split_rows);
            } else if (!split_rows.empty()) {
                const auto partial = dense_view(split->partial.data(), n_owned, dst.cols);
                split->halo->run_features(src, partial, split_rows);
                backend.axpby(1.0f, row_range(partial, split_rows), 1.0f,
                              row_range(dst, split_rows));
            }
            if (!whole_rows.empty()) {
                op.run_features(src, dst, whole_rows);
            }
        },
        t);
}

// From int8 rows: dst (owned rows) = op * dequantize(int8 input), the input's halo rows exchanged
// as int8 bytes (every part shares the per-column parameters, so the bytes mean the same
// everywhere).
void StepContext::aggregate_input(Aggregation kind, SpmmPlan& op, DenseView<float> x_all,
                                  DenseView<float> dst, LayerTiming& t)
{
    if (!int8_input_) {
        aggregate(op, x_all, dst, t);
        return;
    }
    auto& plan = quantized_spmm_[kind];
    if (!plan) {
        plan = backend.make_quantized_spmm_plan(operator_matrix(kind), model.max_dim());
    }
    const auto& q = *int8_input_;
    exchange_and_compute(
        q_rows_.view(), q.cols, [&](RowRange rows) { plan->run(q, dst, rows); }, [] {}, t);
}

void StepContext::load_quantized(const QuantizedView& host)
{
    const auto cols = host.cols;
    const auto words = (cols + 3) / 4;
    if (q_rows_.cols() != words) {
        q_rows_ = exchangeable(words);
        q_scale_ = backend.allocate(1, cols);
        q_zero_ = backend.allocate(1, cols);
    }
    std::vector<float> staged(static_cast<std::size_t>(n_owned * words), 0.0f);
    for (std::int64_t i = 0; i < n_owned; ++i) {
        std::memcpy(reinterpret_cast<char*>(staged.data() + i * words), host.data + i * host.ld,
                    static_cast<std::size_t>(cols));
    }
    backend.copy_from_host(staged.data(), q_rows_.rows_view(0, n_owned));
    backend.copy_from_host(host.scale, q_scale_.view());
    std::vector<float> zero_bits(static_cast<std::size_t>(cols));
    std::memcpy(zero_bits.data(), host.zero_point, static_cast<std::size_t>(cols) * 4);
    backend.copy_from_host(zero_bits.data(), q_zero_.view());
    const QuantizedView device{reinterpret_cast<const std::int8_t*>(q_rows_.data()),
                               n_total,
                               cols,
                               4 * words,
                               q_scale_.data(),
                               reinterpret_cast<const std::int32_t*>(q_zero_.data())};
    auto owned = device;
    owned.rows = n_owned;
    backend.dequantize(owned, view(0, n_owned, cols));
    int8_input_ = device;
}

// Plans that report their memory give it; other plans' operators count as CSR with values.
void StepContext::add_memory(MemoryReport& r) const
{
    for (const auto& [kind, plan] : spmm_) {
        const auto m = plan->memory();
        r += m.total() > 0 ? m : csr_memory(*plan_operators_.at(kind));
    }
    for (const auto& [kind, split] : split_) {
        // Asked now, not when planned: plans allocate workspaces on their first runs and free
        // what they did not keep (release_unkept).
        MemoryReport blocks;
        for (const auto* part : {&split.local_block, &split.halo_block}) {
            const auto& p = part == &split.local_block ? split.local : split.halo;
            const auto m = p->memory();
            blocks += m.total() > 0 ? m : csr_memory(*part);
        }
        blocks.nonzeros = 0;  // the operator's, counted once with its plan
        blocks.limit = 0;
        r += blocks;
        r.feature_buffers += matrix_bytes(split.partial);
    }
    for (const auto& b : buffers_) {
        r.feature_buffers += matrix_bytes(b);
    }
    r.feature_buffers += matrix_bytes(wide_) + matrix_bytes(q_rows_) + matrix_bytes(q_scale_) +
                         matrix_bytes(q_zero_) + matrix_bytes(scratch_);
    for (const auto& [w, words] : packed_weights_) {  // 16-bit copies of the weights
        r.weights += matrix_bytes(words);
    }
    if (sparse_input_) {
        // The input's sparse copy: its arrays, not nonzeros of a graph operator.
        auto m = sparse_input_->memory();
        m.nonzeros = 0;
        r += m;
    }
}

}  // namespace halo::detail
