# KaMinPar and dKaMinPar (KaHIP group, MIT license; github.com/KaHIP/KaMinPar), built from source
# at a pinned commit as part of this build: Debian does not package them. Defines the targets
# KaMinPar::KaMinPar (shared memory) and KaMinPar::dKaMinPar (distributed, MPI): 64-bit edge ids
# and weights, 32-bit node ids (dKaMinPar's global ids are 64-bit). docs/PARTITION.md, "Build".
#
# Where the source comes from, first match wins:
#   1. FETCHCONTENT_SOURCE_DIR_KAMINPAR: an unpacked tree (CMake's own FetchContent override);
#   2. HALO_KAMINPAR_ARCHIVE: a `git archive` tarball of the pinned commit, checked by its sha256
#      (default: ../shared/third_party/KaMinPar-<commit>.tar.gz next to the source tree, the copy
#      kept for machines without network);
#   3. the upstream repository at the pinned commit (needs network).
# Its dependencies come from the system: TBB (libtbb-dev) and Sparsehash (libsparsehash-dev); growt
# is in KaMinPar's own tree. Its CLI, IO library (KaGen), tests and assertions are not built.
include(FetchContent)

set(HALO_KAMINPAR_COMMIT d82640e123ddc71386476c584421a50f0256ac8e)
set(HALO_KAMINPAR_SHA256 c171bb0466982584fa246d4a43e1fa1e92282efa7e25e2e68de1fa227fa73e2e)
set(HALO_KAMINPAR_ARCHIVE
    "${CMAKE_CURRENT_SOURCE_DIR}/../shared/third_party/KaMinPar-d82640e123dd.tar.gz"
    CACHE FILEPATH "Offline copy of KaMinPar at the pinned commit (used when the file exists)")

find_package(TBB QUIET)
find_path(HALO_SPARSEHASH_INCLUDE_DIR google/dense_hash_map)
if(NOT TBB_FOUND OR NOT HALO_SPARSEHASH_INCLUDE_DIR)
  message(FATAL_ERROR
    "HALO_WITH_KAMINPAR=ON needs TBB and Sparsehash (Debian: libtbb-dev libsparsehash-dev, "
    "scripts/install-deps.sh installs them); TBB found: ${TBB_FOUND}, Sparsehash: "
    "${HALO_SPARSEHASH_INCLUDE_DIR}. Or configure with -DHALO_WITH_KAMINPAR=OFF (no "
    "--partitioner kaminpar/dkaminpar).")
endif()

if(FETCHCONTENT_SOURCE_DIR_KAMINPAR)
  message(STATUS "KaMinPar: source tree ${FETCHCONTENT_SOURCE_DIR_KAMINPAR}")
  FetchContent_Declare(KaMinPar GIT_REPOSITORY https://github.com/KaHIP/KaMinPar.git
                       GIT_TAG ${HALO_KAMINPAR_COMMIT})
elseif(EXISTS "${HALO_KAMINPAR_ARCHIVE}")
  message(STATUS "KaMinPar: offline archive ${HALO_KAMINPAR_ARCHIVE}")
  FetchContent_Declare(KaMinPar URL "${HALO_KAMINPAR_ARCHIVE}"
                       URL_HASH SHA256=${HALO_KAMINPAR_SHA256}
                       DOWNLOAD_EXTRACT_TIMESTAMP OFF)
else()
  # No archive: the download needs the network. Where github.com cannot be reached, build without
  # KaMinPar (a warning, and --partitioner auto is METIS) instead of failing the configure step.
  find_package(Git QUIET)
  set(_halo_kaminpar_reachable 1)
  if(GIT_EXECUTABLE)
    execute_process(COMMAND ${GIT_EXECUTABLE} ls-remote https://github.com/KaHIP/KaMinPar.git HEAD
                    RESULT_VARIABLE _halo_kaminpar_reachable OUTPUT_QUIET ERROR_QUIET
                    TIMEOUT 30)
  endif()
  if(NOT _halo_kaminpar_reachable EQUAL 0)
    message(WARNING
      "KaMinPar: no archive at ${HALO_KAMINPAR_ARCHIVE} and https://github.com/KaHIP/KaMinPar "
      "cannot be reached: building WITHOUT KaMinPar and dKaMinPar (--partitioner auto is METIS; "
      "their tests skip). Give -DHALO_KAMINPAR_ARCHIVE=FILE (a git archive of commit "
      "${HALO_KAMINPAR_COMMIT}) or -DFETCHCONTENT_SOURCE_DIR_KAMINPAR=DIR, or configure with "
      "network; -DHALO_WITH_KAMINPAR=OFF silences this.")
    set(HALO_WITH_KAMINPAR OFF)
    return()
  endif()
  message(STATUS "KaMinPar: upstream https://github.com/KaHIP/KaMinPar.git at "
                 "${HALO_KAMINPAR_COMMIT} (no archive at ${HALO_KAMINPAR_ARCHIVE})")
  FetchContent_Declare(KaMinPar GIT_REPOSITORY https://github.com/KaHIP/KaMinPar.git
                       GIT_TAG ${HALO_KAMINPAR_COMMIT})
endif()

# KaMinPar's options (its CMakeLists honours plain variables: policy CMP0077). Edge ids and
# weights are 64-bit (a graph or a rank's block may hold 2^32 entries or more, a rank 2^31 of node
# weight 1 + degree); node ids stay 32-bit, which holds every graph HaloGNN takes (at most 2^31 - 1
# nodes, int32 local ids) and halves KaMinPar's adjacency arrays. dKaMinPar's global ids are
# always 64-bit.
set(KAMINPAR_BUILD_DISTRIBUTED ON)
set(KAMINPAR_BUILD_APPS OFF)
set(KAMINPAR_BUILD_IO OFF)
set(KAMINPAR_BUILD_TESTS OFF)
set(KAMINPAR_BUILD_WITH_KASSERT OFF)
set(KAMINPAR_BUILD_WITH_MTUNE_NATIVE OFF)  # the binary must run on the other machines too
set(KAMINPAR_BUILD_WITH_CCACHE OFF)  # CMAKE_CXX_COMPILER_LAUNCHER of this build applies
set(KAMINPAR_BUILD_WITH_DEBUG_SYMBOLS OFF)
set(KAMINPAR_ENABLE_TIMERS OFF)
set(KAMINPAR_ENABLE_TIMER_BARRIERS OFF)
set(KAMINPAR_64BIT_IDS OFF)
set(KAMINPAR_64BIT_EDGE_IDS ON)
set(KAMINPAR_64BIT_NODE_IDS OFF)
set(KAMINPAR_64BIT_WEIGHTS ON)
set(KAMINPAR_64BIT_LOCAL_WEIGHTS ON)  # a rank may hold more than 2^31 of node weight (1 + degree)
set(INSTALL_KAMINPAR OFF)
set(FETCHCONTENT_UPDATES_DISCONNECTED_KAMINPAR ON)
FetchContent_MakeAvailable(KaMinPar)

# GCC 12: kaminpar-mpi/wrapper.h uses std::ostringstream without including <sstream>; the
# distributed library's own sources are the only ones that include it.
foreach(target KaMinParMPI dKaMinPar)
  target_compile_options(${target} PRIVATE "SHELL:-include sstream")
endforeach()
# KaMinPar's headers are not ours to warn about.
foreach(target KaMinPar dKaMinPar)
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  set_target_properties(${target} PROPERTIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${dirs}")
endforeach()
