# FindPTScotch: locates PT-Scotch with 64-bit SCOTCH_Num (Debian's scotch-int64 variant:
# /usr/include/scotch-int64, /usr/lib/x86_64-linux-gnu/scotch-int64) and defines the imported
# target PTScotch::PTScotch (ptscotch, scotch, ptscotcherr).
# Searches SCOTCH_ROOT (CMake or environment variable), CMAKE_PREFIX_PATH (CMake variable and every
# prefix of the environment variable;
# the GPU machine unpacks the packages under /opt/gpu-deps/usr) and /usr.
# The libraries' own dependencies are found through an rpath that ld.so reads for them too:
# -Wl,--disable-new-dtags turns RUNPATH into RPATH (RUNPATH applies to the executable only).
# Sets PTScotch_FOUND, PTSCOTCH_INCLUDE_DIR, PTSCOTCH_LIBRARY_DIR, PTSCOTCH_NUM_WIDTH.
set(_ptscotch_prefixes ${SCOTCH_ROOT} $ENV{SCOTCH_ROOT})
string(REPLACE ":" ";" _ptscotch_env_prefixes "$ENV{CMAKE_PREFIX_PATH}")
list(APPEND _ptscotch_prefixes ${CMAKE_PREFIX_PATH} ${_ptscotch_env_prefixes} /usr)
find_path(PTSCOTCH_INCLUDE_DIR ptscotch.h
  HINTS ${_ptscotch_prefixes}
  PATH_SUFFIXES include/scotch-int64 scotch-int64
  NO_DEFAULT_PATH)
find_library(PTSCOTCH_LIBRARY NAMES ptscotch
  HINTS ${_ptscotch_prefixes}
  PATH_SUFFIXES lib/x86_64-linux-gnu/scotch-int64 lib/scotch-int64 scotch-int64
  NO_DEFAULT_PATH)
if(PTSCOTCH_LIBRARY)
  get_filename_component(PTSCOTCH_LIBRARY_DIR ${PTSCOTCH_LIBRARY} DIRECTORY)
  find_library(PTSCOTCH_SCOTCH_LIBRARY NAMES scotch HINTS ${PTSCOTCH_LIBRARY_DIR} NO_DEFAULT_PATH)
  find_library(PTSCOTCH_ERR_LIBRARY NAMES ptscotcherr HINTS ${PTSCOTCH_LIBRARY_DIR}
               NO_DEFAULT_PATH)
endif()
if(PTSCOTCH_INCLUDE_DIR AND EXISTS ${PTSCOTCH_INCLUDE_DIR}/scotch.h)
  file(STRINGS ${PTSCOTCH_INCLUDE_DIR}/scotch.h _ptscotch_num REGEX "^typedef [a-z_0-9]+ +SCOTCH_Num;")
  set(PTSCOTCH_NUM_WIDTH 32)
  if(_ptscotch_num MATCHES "int64_t|long")
    set(PTSCOTCH_NUM_WIDTH 64)
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(PTScotch
  REQUIRED_VARS PTSCOTCH_LIBRARY PTSCOTCH_SCOTCH_LIBRARY PTSCOTCH_ERR_LIBRARY PTSCOTCH_INCLUDE_DIR)

if(PTScotch_FOUND AND NOT TARGET PTScotch::PTScotch)
  add_library(PTScotch::PTScotch INTERFACE IMPORTED)
  set_target_properties(PTScotch::PTScotch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${PTSCOTCH_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES
      "${PTSCOTCH_LIBRARY};${PTSCOTCH_SCOTCH_LIBRARY};${PTSCOTCH_ERR_LIBRARY};MPI::MPI_C"
    INTERFACE_LINK_OPTIONS
      "LINKER:--disable-new-dtags;LINKER:-rpath,${PTSCOTCH_LIBRARY_DIR}")
endif()
mark_as_advanced(PTSCOTCH_INCLUDE_DIR PTSCOTCH_LIBRARY PTSCOTCH_SCOTCH_LIBRARY PTSCOTCH_ERR_LIBRARY)
