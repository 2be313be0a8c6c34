#include "halo/comm/exchange_spec.hpp"

#include <exception>
#include <string>

#include "halo/comm/int8_exchanger.hpp"
#include "halo/comm/mpi_exchanger.hpp"
#include "halo/core/error.hpp"
#include "halo/mpi/mpi_error.hpp"
#ifdef HALO_HAVE_CUDA
#include "halo/comm/nccl_error.hpp"
#include "halo/comm/nccl_exchanger.hpp"
#include "halo/kernels/cuda/context.hpp"
#include "halo/kernels/cuda/device.hpp"
#endif

namespace halo {

ExchangeSpec parse_exchange_spec(const std::string& text)
{
    if (text == "int8") {
        return {"", true};
    }
    if (text.ends_with("-int8")) {
        return {text.substr(0, text.size() - 5), true};
    }
    return {text, false};
}

ExchangeSpec::Registration parse_registration(const std::string& text)
{
    using R = ExchangeSpec::Registration;
    if (text == "auto") {
        return R::automatic;
    }
    if (text == "on") {
        return R::on;
    }
    if (text == "off") {
        return R::off;
    }
    HALO_THROW(InputError, "--nccl-register ", text, ": expected auto, on or off");
}

std::string requested_transport(const ExchangeSpec& spec, bool device)
{
    return !spec.transport.empty() ? spec.transport : device ? "nccl" : "mpi";
}

Exchange::Exchange() : exceptions_(std::uncaught_exceptions()) {}

Exchange::~Exchange()
{
#ifdef HALO_HAVE_CUDA
    if (nccl_ && std::uncaught_exceptions() > exceptions_) {
        nccl_->abort();
    }
#endif
    exchanger_.reset();  // before the communicator it runs on
    nccl_.reset();
}

std::unique_ptr<Exchange> make_exchanger(const ExchangeSpec& spec, const MpiWorld& world,
                                         const Shard& shard, std::int64_t max_width,
                                         cuda::Context* device)
{
    auto out = std::make_unique<Exchange>();
    const MPI_Comm comm = world.comm();
    if (device == nullptr) {
        if (spec.int8_rows && world.size() > 1) {
            out->exchanger_ = make_int8_exchanger(
                [&](const Shard& s, std::int64_t w) { return make_mpi_exchanger(comm, s, w); },
                make_cpu_int8_codec(), shard, max_width);
            out->int8_rows_ = true;
        } else {
            out->exchanger_ = make_mpi_exchanger(comm, shard, max_width);
        }
        out->transport_ = "mpi";
        return out;
    }
#ifdef HALO_HAVE_CUDA
    auto& ctx = *device;
    std::string transport = requested_transport(spec, true);
    // NCCL needs a GPU per rank. Decided collectively: every rank must pick the same exchanger.
    int shares =
        (spec.fixed_device && world.local_size() > 1) || world.local_size() > cuda::device_count();
    int any_shares = 0;
    HALO_MPI_TRY(MPI_Allreduce(&shares, &any_shares, 1, MPI_INT, MPI_MAX, comm));
    if (world.size() > 1 && any_shares == 1 && transport == "nccl") {
        if (!spec.transport.empty()) {
            HALO_THROW(InputError,
                       "--exchange nccl needs one GPU per rank, but ranks "
                       "share a GPU on some node (",
                       world.local_size(), " ranks and ", cuda::device_count(),
                       " visible GPU(s) on ", world.node_name(),
                       spec.fixed_device ? ", --device given" : "",
                       "); use --exchange mpi or fewer ranks per node");
        }
        transport = "mpi";
        out->note_ = "ranks share a GPU: halo exchange over MPI (NCCL needs one GPU per rank)";
    }
    if (world.size() == 1) {
        out->exchanger_ = make_local_exchanger(shard);
        out->transport_ = "local";
        return out;
    }
    InnerExchangerFactory make_transport;
    if (transport == "nccl") {
        out->nccl_ = std::make_shared<NcclComm>(comm, ctx);
        auto* nccl = out->nccl_.get();
        make_transport = [&ctx, nccl, &out, pieces = spec.pieces](const Shard& s, std::int64_t w) {
            const NcclExchangerOptions options{.register_buffers = out->registered_,
                                               .pieces = pieces};
            return make_nccl_exchanger(ctx, *nccl, s, w, options);
        };
        out->registered_ = spec.registration != ExchangeSpec::Registration::off;
        out->pieces_ = spec.pieces;
    } else {
        make_transport = [&ctx, comm](const Shard& s, std::int64_t w) {
            return make_mpi_device_exchanger(ctx, comm, s, w);
        };
    }
    const auto build = [&] {
        return spec.int8_rows ? make_int8_exchanger(make_transport, cuda::make_int8_codec(ctx),
                                                    shard, max_width)
                              : make_transport(shard, max_width);
    };
    if (out->registered_ && spec.registration == ExchangeSpec::Registration::automatic) {
        // Registration is local (ncclMemAlloc, ncclCommRegister), so a rank that cannot
        // register is found here, before any exchange; every rank then uses NCCL's own buffers,
        // as NCCL needs all or none of a transfer's buffers registered.
        std::string why;
        try {
            out->exchanger_ = build();
        } catch (const NcclError& e) {
            why = e.what();
        }
        const int failed = why.empty() ? world.size() : world.rank();
        int first = world.size();
        HALO_MPI_TRY(MPI_Allreduce(&failed, &first, 1, MPI_INT, MPI_MIN, comm));
        if (first < world.size()) {
            // The failed rank's reason, for the note rank 0 prints.
            int length = static_cast<int>(why.size());
            HALO_MPI_TRY(MPI_Bcast(&length, 1, MPI_INT, first, comm));
            why.resize(static_cast<std::size_t>(length));
            HALO_MPI_TRY(MPI_Bcast(why.data(), length, MPI_CHAR, first, comm));
            out->exchanger_.reset();
            out->registered_ = false;
            out->note_ = detail::concat("NCCL buffer registration failed on rank ", first, " (",
                                        why, "); NCCL runs with its own buffers");
        }
    }
    if (!out->exchanger_) {
        out->exchanger_ = build();
    }
    out->transport_ = transport;
    out->int8_rows_ = spec.int8_rows;
    return out;
#else
    HALO_THROW(LogicError, "a device exchanger in a build without CUDA");
#endif
}

}  // namespace halo
