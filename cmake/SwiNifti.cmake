# SwiNifti.cmake -- find niftilib's NIfTI-1/-2 reader (optional).
#
# libnifti2 (Debian: libnifti2-dev) reads and writes both NIfTI-1 and NIfTI-2, gzipped
# or not, through znzlib (libznz-dev) and zlib. (libniftiio is the NIfTI-1-only
# library of the same project; its symbols clash with libnifti2's, so it is not linked.)
# Defines, when found: the imported target swi::nifti and SWI_NIFTI_FOUND=TRUE.

if(TARGET swi::nifti OR DEFINED _SWI_NIFTI_SEARCHED)
  return()
endif()
set(_SWI_NIFTI_SEARCHED TRUE)
set(SWI_NIFTI_FOUND FALSE)

find_package(ZLIB QUIET)
find_path(SWI_NIFTI_INCLUDE_DIR nifti2_io.h PATH_SUFFIXES nifti)
find_path(SWI_ZNZ_INCLUDE_DIR znzlib.h PATH_SUFFIXES nifti)
find_library(SWI_NIFTI2_LIBRARY nifti2)
find_library(SWI_ZNZ_LIBRARY znz)

if(ZLIB_FOUND AND SWI_NIFTI_INCLUDE_DIR AND SWI_ZNZ_INCLUDE_DIR AND SWI_NIFTI2_LIBRARY
   AND SWI_ZNZ_LIBRARY)
  set(SWI_NIFTI_FOUND TRUE)
  add_library(swi::nifti INTERFACE IMPORTED GLOBAL)
  set_target_properties(swi::nifti PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${SWI_NIFTI_INCLUDE_DIR};${SWI_ZNZ_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${SWI_NIFTI2_LIBRARY};${SWI_ZNZ_LIBRARY};ZLIB::ZLIB;m")
  message(STATUS "NIfTI: ${SWI_NIFTI2_LIBRARY}")
else()
  message(STATUS "NIfTI: libnifti2/libznz/zlib not found (apt-get install libnifti2-dev); "
                 "swi will be built without NIfTI support")
endif()
