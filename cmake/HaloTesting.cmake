# halo_add_test(name [SOURCES file...] [LIBRARIES target...] [MPI_SIZE n] [GPUS n]
#               [GPU_MEMORY_GIB g] LABELS label...)
#
# Builds one GoogleTest executable (sources default to <name>.cpp) and registers it with CTest.
# Labels: unit (CPU, always), mpi (runs under mpiexec), gpu (needs a CUDA device; the test skips
# itself with a message when none is present), gpu-mpi (one GPU per rank).
# With MPI_SIZE n the test runs as `mpiexec -n n` with a main that initializes MPI; Open MPI gets
# --oversubscribe (n may exceed the cores, as on 2-core CI) and --allow-run-as-root (CI and the GPU
# machine run as root). GPUS n records how many devices the test wants in HALO_TEST_GPUS.
#
# Device memory: a test labelled gpu or gpu-mpi declares what it needs as ctest RESOURCE_GROUPS of
# the resource `gpus`, one slot per GiB of one device (halo_gpu_resources): GPU_MEMORY_GIB g per
# process (default HALO_TEST_GPU_MEMORY_GIB), every rank of an MPI test on one device when GPUS is
# 1, one group per device otherwise. ctest honours it only with a resource spec file
# (scripts/gpu-check.sh writes one from nvidia-smi: each device's GiB less 2), and then never runs
# tests side by side whose declarations exceed a device: `ctest -L 'gpu|gpu-mpi' -j8` is safe on
# one H100. Without a spec file (CI, a plain ctest) the declarations are ignored. The values come
# from each program's pool high-water mark (HALO_TEST_REPORT_DEVICE_MEMORY; docs/RELIABILITY.md
# "GPU tests in parallel") plus the CUDA context.
set(HALO_TEST_DATA_DIR "${PROJECT_SOURCE_DIR}/../shared/data" CACHE PATH
    "Directory with the shared real graphs (tests skip when it is absent)")

execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _halo_mpiexec_version
                ERROR_QUIET)
set(HALO_MPIEXEC_EXTRA_FLAGS "" CACHE STRING "Extra flags for mpiexec in tests")
if(_halo_mpiexec_version MATCHES "Open MPI|OpenRTE")
  set(_halo_openmpi_flags --oversubscribe --allow-run-as-root)
endif()

# Every test gets its own Open MPI session directory base (orte_tmpdir_base,
# /tmp/halo-ctest-<hash of the build tree>/<test>, created by mpiexec): Open MPI creates (and, when
# a job ends, removes) its session directory tree under one base, and two mpiexec jobs of tests
# that ctest -j runs side by side race on creating its shared top ("opal_os_dirpath_create ...
# Error: File exists"). TMPDIR is left alone (std::filesystem::temp_directory_path needs it to
# exist). Call it in the directory that added the test, after any ENVIRONMENT it sets.
string(MD5 _halo_build_hash "${CMAKE_BINARY_DIR}")
string(SUBSTRING "${_halo_build_hash}" 0 8 _halo_build_hash)
set(HALO_TEST_TMPDIR_BASE "/tmp/halo-ctest-${_halo_build_hash}" CACHE INTERNAL "")
set(HALO_TEST_GPU_MEMORY_GIB 4 CACHE STRING
    "Device memory (GiB) a GPU test declares unless it says GPU_MEMORY_GIB")
# halo_gpu_resources(test processes gpus gib): the RESOURCE_GROUPS of a test of `processes`
# processes over `gpus` devices, each process needing `gib` GiB.
function(halo_gpu_resources name processes gpus gib)
  if(gpus GREATER 1)
    math(EXPR _per_device "(${processes} + ${gpus} - 1) / ${gpus} * ${gib}")
    set_property(TEST ${name} PROPERTY RESOURCE_GROUPS "${gpus},gpus:${_per_device}")
  else()
    math(EXPR _slots "${processes} * ${gib}")
    set_property(TEST ${name} PROPERTY RESOURCE_GROUPS "gpus:${_slots}")
  endif()
endfunction()

function(halo_test_tmpdir name)
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT
               "OMPI_MCA_orte_tmpdir_base=${HALO_TEST_TMPDIR_BASE}/${name}")
endfunction()

function(halo_add_test name)
  cmake_parse_arguments(T "" "MPI_SIZE;GPUS;TIMEOUT;GPU_MEMORY_GIB" "SOURCES;LIBRARIES;LABELS"
                        ${ARGN})
  if(NOT T_SOURCES)
    set(T_SOURCES ${name}.cpp)
  endif()
  if(NOT T_LABELS)
    message(FATAL_ERROR "halo_add_test(${name}): LABELS is required")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBRARIES} halo_test_support GTest::gtest)
  target_compile_definitions(${name} PRIVATE HALO_TEST_DATA_DIR="${HALO_TEST_DATA_DIR}")
  halo_set_warnings(${name})

  if(T_MPI_SIZE)
    target_link_libraries(${name} PRIVATE halo_test_mpi_main)
    add_test(NAME ${name}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_MPI_SIZE}
                     ${_halo_openmpi_flags} ${HALO_MPIEXEC_EXTRA_FLAGS} ${MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS})
    set(_procs ${T_MPI_SIZE})
  else()
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
    add_test(NAME ${name} COMMAND ${name})
    set(_procs 1)
  endif()
  if(NOT T_GPUS)
    set(T_GPUS 0)
  endif()
  # Ranks run single-threaded in MPI tests so that n ranks do not fight over 2 cores.
  # Passive OpenMP waits: with ctest -j, spinning idle threads would steal the cores of the tests
  # running beside them.
  set(_env "HALO_TEST_GPUS=${T_GPUS}" "OMP_WAIT_POLICY=PASSIVE"
           "OMPI_MCA_btl_vader_single_copy_mechanism=none"
           "OMPI_MCA_rmaps_base_oversubscribe=1")
  if(T_MPI_SIZE)
    list(APPEND _env "OMP_NUM_THREADS=1")
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${T_LABELS}" PROCESSORS ${_procs} TIMEOUT ${T_TIMEOUT} ENVIRONMENT "${_env}")
  if("gpu" IN_LIST T_LABELS OR "gpu-mpi" IN_LIST T_LABELS)
    if(NOT T_GPU_MEMORY_GIB)
      set(T_GPU_MEMORY_GIB ${HALO_TEST_GPU_MEMORY_GIB})
    endif()
    set(_gpus ${T_GPUS})
    if(_gpus LESS 1)
      set(_gpus 1)
    endif()
    halo_gpu_resources(${name} ${_procs} ${_gpus} ${T_GPU_MEMORY_GIB})
  elseif(T_GPU_MEMORY_GIB)
    message(FATAL_ERROR "halo_add_test(${name}): GPU_MEMORY_GIB without a gpu or gpu-mpi label")
  endif()
  halo_test_tmpdir(${name})
endfunction()
