// The SpMM registry's factories (halo/kernels_host/spmm_registry.hpp), one line each: the
// registry's table (spmm_registry.cpp, halo_kernels_host) takes their addresses, and the CUDA
// library (cuda/spmm/spmm_factories.cpp, halo_kernels) makes sure that every program linking it
// links them all. A kernel's factory is defined beside its kernel in cuda/ and named here once.
//
// HALO_SPMM_FACTORIES(X) calls X(type, name) for each, type SpmmPlanFactory or
// ScaledSpmmPlanFactory, name in namespace halo::cuda.
#pragma once

#include "halo/kernels_host/spmm_registry.hpp"

#define HALO_SPMM_FACTORIES(X)                                                               \
    X(SpmmPlanFactory, stored_or_modeled_spmm_factory)         /* spmm/autotuned_spmm.cpp */ \
    X(SpmmPlanFactory, cusparse_spmm_factory)                  /* spmm/cusparse_spmm.cpp */  \
    X(SpmmPlanFactory, accel_gcn_spmm_factory)                 /* spmm/accel_gcn.cpp */      \
    X(SpmmPlanFactory, accel_gcn_nosort_spmm_factory)          /* spmm/accel_gcn.cpp */      \
    X(SpmmPlanFactory, accel_gcn_nocombine_spmm_factory)       /* spmm/accel_gcn.cpp */      \
    X(SpmmPlanFactory, mergepath_spmm_factory)                 /* spmm/mergepath.cpp */      \
    X(SpmmPlanFactory, mergepath_c200_spmm_factory)            /* spmm/mergepath.cpp */      \
    X(SpmmPlanFactory, mergepath_c400_spmm_factory)            /* spmm/mergepath.cpp */      \
    X(SpmmPlanFactory, mergepath_c400_t128_spmm_factory)       /* spmm/column_tiled.cpp */   \
    X(SpmmPlanFactory, mergepath_c400_l2hints_spmm_factory)    /* spmm/mergepath.cpp */      \
    X(SpmmPlanFactory, rowsplit_spmm_factory)                  /* spmm/rowsplit.cpp */       \
    X(SpmmPlanFactory, rowchunk_spmm_factory)                  /* spmm/rowsplit.cpp */       \
    X(SpmmPlanFactory, resident_spmm_factory)                  /* spmm/resident.cpp */       \
    X(SpmmPlanFactory, resident_csr_order_spmm_factory)        /* spmm/resident.cpp */       \
    X(SpmmPlanFactory, autotune_spmm_factory)                  /* spmm/autotuned_spmm.cpp */ \
    X(SpmmPlanFactory, aes_spmm_factory)                       /* aes/aes.cpp */             \
    X(ScaledSpmmPlanFactory, stored_or_modeled_scaled_factory) /* spmm/autotuned_spmm.cpp */ \
    X(ScaledSpmmPlanFactory, cusparse_scaled_factory)          /* spmm/cusparse_spmm.cpp */  \
    X(ScaledSpmmPlanFactory, accel_gcn_scaled_factory)         /* spmm/accel_gcn.cpp */      \
    X(ScaledSpmmPlanFactory, mergepath_scaled_factory)         /* spmm/mergepath.cpp */      \
    X(ScaledSpmmPlanFactory, rowsplit_scaled_factory)          /* spmm/rowsplit.cpp */       \
    X(ScaledSpmmPlanFactory, rowchunk_scaled_factory)          /* spmm/rowsplit.cpp */       \
    X(ScaledSpmmPlanFactory, resident_scaled_factory)          /* spmm/resident.cpp */
