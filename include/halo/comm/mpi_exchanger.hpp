// The MPI halo exchanger (CPU path; also the transport under the CUDA path when NCCL is not used):
// nonblocking receives straight into the halo region, packed sends, large blocks split into
// messages of at most `max_message_bytes` so counts never exceed MPI's int range.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "halo/core/exchanger.hpp"
#include "halo/core/shard.hpp"

namespace halo {

struct MpiExchangerOptions {
    /// Largest single message; blocks above it are split (MPI counts are int). The default stays
    /// below 2^31 bytes; tests lower it to exercise the splitting.
    std::int64_t max_message_bytes = (std::int64_t{1} << 30);
    /// Message tag base; exchangers on one communicator that may overlap need distinct tags.
    int tag = 7100;
};

/// Checks, collectively over `comm` (every rank must call it with its own shard), that the halo
/// plans agree: each rank's send count to a peer equals the peer's receive count from it, the
/// rank count equals the shard's num_parts, and the global ids sent are the ones the peer expects
/// (compared through a hash of the ids in order). Each rank also checks its own plan's structure
/// (peers ascending, in range and not itself; offsets monotone; send rows owned).
/// Throws halo::InputError on every rank (with the same message) when any pair disagrees, naming
/// both ranks and the counts, e.g. "data.h5: part 1 sends 12 rows to part 2, but part 2 expects 10
/// from part 1", so that no rank goes on to an exchange that would hang. `where` (a file name)
/// starts the message. Costs one all-to-all of two int64 per rank pair and three small
/// collectives; every rank makes the same calls whatever it finds, so the check cannot hang.
void check_halo_plan(MPI_Comm comm, const Shard& shard, const std::string& where);

/// An exchanger for `shard`'s plan over `comm` (rank == shard.part), which it uses as given (not
/// duplicated): its messages use `options.tag` only. `max_dim` is the widest row that will be
/// exchanged: send and receive staging is sized for it once, so start() allocates nothing;
/// start() accepts any width up to it and any leading dimension (ld > cols receives into staging
/// and copies in finish()). finish() throws halo::MpiError when a block arrives shorter than the
/// plan says (plans that disagree; check_halo_plan first). Throws halo::LogicError when the shard
/// does not belong to this rank or its plan indexes outside the shard.
std::unique_ptr<HaloExchanger> make_mpi_exchanger(MPI_Comm comm, const Shard& shard,
                                                  std::int64_t max_dim,
                                                  const MpiExchangerOptions& options = {});

}  // namespace halo
