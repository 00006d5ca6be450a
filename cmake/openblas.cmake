# OpenBLAS's CBLAS (matmul in the tape, Muon's products) as the target
# PkgConfig::OPENBLAS, preferring the OpenMP build of OpenBLAS.
#
# The OpenMP build (Debian: libopenblas-openmp-dev) runs its threads on
# libgomp's pool, the one the optimizer's parallel loops use; the pthread
# build (Debian's default) keeps a second pool whose idle threads spin
# against OpenMP's on few cores, so the optim command runs it on one thread
# (docs/performance.md). Every Debian build has the same soname,
# libopenblas.so.0, and the alternatives system picks which one that name
# loads; so the OpenMP build is linked by its full path and its directory is
# put in the rpath. The command tells at run time which build it got
# (openblas_get_parallel), whatever the link said.
#
# OPTIM_OPENBLAS_OPENMP: AUTO (the OpenMP build when found), ON (require it),
# OFF (the openblas that pkg-config finds, as the alternatives choose).
set(OPTIM_OPENBLAS_OPENMP AUTO CACHE STRING "Link the OpenMP build of OpenBLAS: AUTO, ON or OFF")
set_property(CACHE OPTIM_OPENBLAS_OPENMP PROPERTY STRINGS AUTO ON OFF)
set(OPTIM_OPENBLAS_RPATH "") # the OpenMP build's directory, for the install rpath
set(OPTIM_PC_OPENBLAS "-lopenblas") # optim.pc's Libs.private
set(OPTIM_OPENBLAS_OPENMP_USED "") # the OpenMP build's library, for optimConfig.cmake
if(NOT OPTIM_OPENBLAS_OPENMP STREQUAL "OFF")
  set(_arch "${CMAKE_LIBRARY_ARCHITECTURE}")
  find_library(OPTIM_OPENBLAS_OPENMP_LIBRARY openblas NO_DEFAULT_PATH
    PATHS /usr/lib/${_arch}/openblas-openmp /usr/lib/openblas-openmp /usr/lib64/openblas-openmp)
  find_path(OPTIM_OPENBLAS_OPENMP_INCLUDE cblas.h NO_DEFAULT_PATH
    PATHS /usr/include/${_arch}/openblas-openmp /usr/include/openblas-openmp)
  if(OPTIM_OPENBLAS_OPENMP_LIBRARY AND OPTIM_OPENBLAS_OPENMP_INCLUDE)
    add_library(PkgConfig::OPENBLAS INTERFACE IMPORTED)
    target_include_directories(PkgConfig::OPENBLAS INTERFACE ${OPTIM_OPENBLAS_OPENMP_INCLUDE})
    target_link_libraries(PkgConfig::OPENBLAS INTERFACE ${OPTIM_OPENBLAS_OPENMP_LIBRARY})
    set(OPTIM_OPENBLAS_OPENMP_USED ${OPTIM_OPENBLAS_OPENMP_LIBRARY})
    get_filename_component(OPTIM_OPENBLAS_RPATH ${OPTIM_OPENBLAS_OPENMP_LIBRARY} DIRECTORY)
    set(OPTIM_PC_OPENBLAS "-L${OPTIM_OPENBLAS_RPATH} -Wl,-rpath,${OPTIM_OPENBLAS_RPATH} -lopenblas")
    message(STATUS "optim: OpenBLAS, the OpenMP build: ${OPTIM_OPENBLAS_OPENMP_LIBRARY}")
    return()
  endif()
  if(OPTIM_OPENBLAS_OPENMP STREQUAL "ON")
    message(FATAL_ERROR "OPTIM_OPENBLAS_OPENMP=ON but no OpenMP build of OpenBLAS was found (Debian: "
      "apt-get install libopenblas-openmp-dev, as scripts/deps.sh does); or configure with "
      "-DOPTIM_OPENBLAS_OPENMP=AUTO")
  endif()
endif()
# Debian's libopenblas-dev ships openblas.pc; elsewhere look for cblas.h and
# libopenblas directly.
pkg_check_modules(OPENBLAS IMPORTED_TARGET openblas)
if(NOT OPENBLAS_FOUND)
  find_path(OPENBLAS_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas REQUIRED)
  find_library(OPENBLAS_LIBRARY openblas REQUIRED)
  add_library(PkgConfig::OPENBLAS INTERFACE IMPORTED)
  target_include_directories(PkgConfig::OPENBLAS INTERFACE ${OPENBLAS_CBLAS_INCLUDE})
  target_link_libraries(PkgConfig::OPENBLAS INTERFACE ${OPENBLAS_LIBRARY})
endif()
message(STATUS "optim: OpenBLAS as the system chooses, not the OpenMP build (OPTIM_OPENBLAS_OPENMP="
  "${OPTIM_OPENBLAS_OPENMP}; Debian: apt-get install libopenblas-openmp-dev): unless the library loaded at run "
  "time is an OpenMP build, the optim command runs BLAS on one thread")
