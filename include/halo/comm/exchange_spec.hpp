// Runtime assembly of the halo exchange from its description (halo-infer --exchange): the
// transport (MPI on host or device buffers, NCCL, nothing for a single part), chosen alike on
// every rank, and the int8 decorator (halo/comm/int8_exchanger.hpp) around it. Part of halo_comm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "halo/comm/mpi_world.hpp"
#include "halo/core/exchanger.hpp"
#include "halo/core/shard.hpp"

namespace halo {

namespace cuda {
class Context;
}
class NcclComm;

struct ExchangeSpec {
    /// "nccl", "mpi", or empty: the backend's default (nccl on a device, mpi on the host).
    std::string transport;
    /// Rows travel as int8 records with a scale and zero point per row (approximate).
    bool int8_rows = false;
    /// Every rank was given one device (halo-infer --device): ranks of a node then share it.
    bool fixed_device = false;
    /// NCCL user buffer registration (NcclExchangerOptions::register_buffers; halo-infer
    /// --nccl-register): `automatic` registers where every rank can, and falls back to NCCL's
    /// own buffers on every rank (with a note) where one cannot; `on` requires it (the rank
    /// that cannot throws halo::NcclError); `off` never registers. Other transports ignore it.
    enum class Registration { automatic, on, off };
    Registration registration = Registration::automatic;
    /// NCCL: each exchange in this many pieces, packing one while the previous moves
    /// (NcclExchangerOptions::pieces; halo-infer --exchange-pieces). Other transports ignore it.
    /// 2 by measurement (docs/NOTEBOOK.md "The exchange in pieces": on 4 H200s 2.1-3.4% faster
    /// than 4 pieces; on 4 H100s 2, 4 and 8 within 0.5%).
    int pieces = 2;
};

/// "auto" | "on" | "off" (halo-infer --nccl-register); throws halo::InputError otherwise.
ExchangeSpec::Registration parse_registration(const std::string& text);

/// "nccl" | "mpi" | "int8" (the default transport) | "nccl-int8" | "mpi-int8" | "" (the default).
ExchangeSpec parse_exchange_spec(const std::string& text);

/// The transport an ExchangeSpec asks for on a backend with (device) or without device memory,
/// before make_exchanger's collective choice: the spec's, or the default.
std::string requested_transport(const ExchangeSpec& spec, bool device);

/// An exchanger made by make_exchanger, with what it runs on (the NCCL communicator). Destroyed
/// while an exception propagates, it first aborts the NCCL communicator (ncclCommAbort): a peer
/// may be blocked in a grouped send or receive with this rank, and a normal teardown would wait
/// for it.
class Exchange {
public:
    Exchange();
    ~Exchange();
    Exchange(const Exchange&) = delete;
    Exchange& operator=(const Exchange&) = delete;

    HaloExchanger& exchanger() const { return *exchanger_; }
    /// What moves the rows: "local" (a single part on a device), "mpi" or "nccl".
    const std::string& transport() const { return transport_; }
    /// transport(), with "-int8" when rows travel as int8 records.
    std::string name() const { return transport_ + (int8_rows_ ? "-int8" : ""); }
    /// Whether NCCL runs with registered buffers.
    bool registered() const { return registered_; }
    /// The pieces each NCCL exchange moves in (ExchangeSpec::pieces); 1 for other transports.
    int pieces() const { return pieces_; }
    /// Why the transport differs from the one asked for (empty when it does not).
    const std::string& note() const { return note_; }

private:
    friend std::unique_ptr<Exchange> make_exchanger(const ExchangeSpec&, const MpiWorld&,
                                                    const Shard&, std::int64_t, cuda::Context*);
    int exceptions_ = 0;
    std::shared_ptr<NcclComm> nccl_;  // shared_ptr: NcclComm is complete only in CUDA builds
    std::unique_ptr<HaloExchanger> exchanger_;
    std::string transport_;
    bool int8_rows_ = false;
    bool registered_ = false;
    int pieces_ = 1;
    std::string note_;
};

/// The exchanger of this rank's `shard` for rows up to `max_width` floats, collectively over
/// `world` (every rank calls it with the same spec). `device` is the CUDA context of the
/// backend's matrices, or null for host matrices (the CPU backend: MPI, int8 on two or more
/// ranks). On a device: a single part needs no transport ("local", never int8); otherwise NCCL
/// unless MPI is asked for, or unless ranks share a GPU on some node (NCCL needs one per rank),
/// where MPI over device buffers takes its place with a note, or, when NCCL was asked for
/// explicitly, a halo::InputError on every rank.
std::unique_ptr<Exchange> make_exchanger(const ExchangeSpec& spec, const MpiWorld& world,
                                         const Shard& shard, std::int64_t max_width,
                                         cuda::Context* device);

}  // namespace halo
