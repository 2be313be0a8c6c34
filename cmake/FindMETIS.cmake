# FindMETIS: locates METIS 5 (metis.h, libmetis) and defines the imported target METIS::METIS.
# Honours METIS_ROOT (CMake variable or environment variable), then the usual prefixes.
# Sets METIS_FOUND, METIS_INCLUDE_DIR, METIS_LIBRARY, METIS_IDX_WIDTH (32 or 64).
find_path(METIS_INCLUDE_DIR metis.h
  HINTS ${METIS_ROOT} $ENV{METIS_ROOT}
  PATH_SUFFIXES include include/metis)
find_library(METIS_LIBRARY NAMES metis
  HINTS ${METIS_ROOT} $ENV{METIS_ROOT}
  PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(METIS_INCLUDE_DIR AND EXISTS ${METIS_INCLUDE_DIR}/metis.h)
  file(STRINGS ${METIS_INCLUDE_DIR}/metis.h _metis_idx REGEX "^#define IDXTYPEWIDTH [0-9]+")
  string(REGEX REPLACE ".*IDXTYPEWIDTH ([0-9]+).*" "\\1" METIS_IDX_WIDTH "${_metis_idx}")
  file(STRINGS ${METIS_INCLUDE_DIR}/metis.h _metis_major REGEX "^#define METIS_VER_MAJOR")
  string(REGEX REPLACE ".*METIS_VER_MAJOR[ \t]+([0-9]+).*" "\\1" METIS_VERSION "${_metis_major}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(METIS
  REQUIRED_VARS METIS_LIBRARY METIS_INCLUDE_DIR
  VERSION_VAR METIS_VERSION)

if(METIS_FOUND AND NOT TARGET METIS::METIS)
  add_library(METIS::METIS UNKNOWN IMPORTED)
  set_target_properties(METIS::METIS PROPERTIES
    IMPORTED_LOCATION "${METIS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${METIS_INCLUDE_DIR}")
endif()
mark_as_advanced(METIS_INCLUDE_DIR METIS_LIBRARY)
