// Engine::Impl (internal to halo_engine): the model's layers as steps over one StepContext
// (layer_step.hpp), or, out of core, the row-block driver; and what a run leaves behind (replay
// state, the host output). engine.cpp builds and runs it; engine_reports.cpp estimates its
// memory, chooses row blocks and reports.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "halo/engine/engine.hpp"
#include "layer_step.hpp"
#include "row_block_driver.hpp"

namespace halo {

struct Engine::Impl {
    Model model;
    EngineOptions options;
    detail::StepContext ctx;
    std::vector<std::unique_ptr<detail::LayerStep>> steps;
    std::optional<QuantizedView> int8_input_host;  // the host rows of the current run, if int8
    // EngineOptions::replay: the runs from layer 0 that completed (a run that threw, e.g. on an
    // fp16 overflow, may have left later layers' plans and 16-bit weights unallocated, and an
    // allocation inside a recording would become part of the graph), the recording's output
    // buffer and input kind, and why recording failed (empty: it did not).
    int complete_runs = 0;
    bool recorded = false;
    bool recorded_int8 = false;
    bool recorded_sparse = false;
    int recorded_out = -1;
    std::string replay_note;
    // set_sparse_input(): what it chose, and whether the current run's input is that matrix.
    std::string sparse_note;
    bool sparse_run = false;
    // Out of core: the row-block driver over the layers' host operators.
    std::unique_ptr<detail::RowBlockDriver> row_blocks;
    std::int64_t memory_limit = 0;

    // The output of every run lands in one host buffer, allocated uninitialized on the first run
    // and reused: a fresh zero-filled vector per run cost more in page faults and zeroing than
    // the copy itself (1.7 GB/s measured on an H200 machine, against 16 GB/s pageable).
    std::unique_ptr<float[]> host_output;
    std::size_t host_output_size = 0;
    // Engine::defer_download: the next run leaves its output in this buffer (-1: none).
    bool defer_next = false;
    int deferred = -1;

    Impl(Backend& b, HaloExchanger& e, const Shard& s, const Model& m, EngineOptions o);

    // --- Runs (engine.cpp) ---

    // The owned rows of the model's output in `buffer`.
    DenseView<float> output_view(int buffer);
    // The output a deferred run left on the backend (Engine::defer_download).
    DenseView<float> deferred_output();
    std::span<const float> download(int buffer);
    // Runs layer l from buffer `in` into another buffer; returns the output buffer index.
    int forward(std::size_t l, int in, LayerTiming& t);

    // --- Memory and out of core (engine_reports.cpp; the driver: row_block_driver.cpp) ---

    // Row blocks when asked for, or when the in-memory working set exceeds the limit.
    bool use_row_blocks() const;
    /// 16-bit activations: the input of layer `first` in buffer 0 (owned rows) rounded as the
    /// layers store their matrices; the output of layer l in `buffer` the same unless l is the
    /// last (StepContext::store).
    void store_input(std::size_t first);
    /// forward() of a layer whose type reads fp32 rows in a run stored in 16 bits.
    int forward_widened(std::size_t l, int in, LayerTiming& t);
    /// Layer l's step on buffer `in`, the other three buffers free for it; its output buffer.
    int step_on(std::size_t l, int in, LayerTiming& t);
    /// Whether a run from layer `first` stores its input in 16 bits (StepContext::packed()).
    bool packed_input(std::size_t first) const;
    /// Where a run from layer `first` writes its fp32 input (owned rows) before store_input:
    /// buffer 0, or the scratch that store_input stores into buffer 0 in 16 bits.
    DenseView<float> input_view(std::size_t first);
    /// Layer l's output rows (in work buffer `buffer`) on the host, fp32.
    std::vector<float> layer_rows(std::size_t l, int buffer);
    void store_output(std::size_t l, int buffer);
    // The driver takes each layer's host operator (the one it aggregates with, or attends over
    // with self-loops); no plans are made here.
    void start_row_blocks();
    // The in-memory run's backend memory before anything is allocated: every distinct operator
    // as a CSR with values (the gcn one with a diagonal entry per row), the four work buffers
    // and the widest extra buffer, the weights. Plans' metadata and workspaces are not known
    // yet: memory_report() adds them after construction.
    MemoryReport in_memory_estimate() const;
    // The in-memory run's backend memory as allocated.
    MemoryReport in_memory_report() const;
};

}  // namespace halo
