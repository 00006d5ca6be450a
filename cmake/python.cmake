# The Python package `optim` (python/optim, docs/python.md): a CPython
# extension written against the CPython API only, linked with liboptim.so,
# and the package's Python files. The build puts the package in
# build/python/optim (PYTHONPATH=build/python imports it);
# `cmake --install build --prefix P` puts it in P's site-packages
# (P/lib/python3.X/site-packages/optim: a venv's, or ~/.local's user site).
# Built where Python's headers are found (Debian: python3-dev); not in the
# sanitizer and fuzz builds, whose runtime would have to be loaded before
# the interpreter. The tests (tests/python) run where it is built, and are
# skipped, with the reason, where it or NumPy or pytest is missing.
option(OPTIM_BUILD_PYTHON "Build the Python package optim (needs Python's headers: python3-dev)" ON)
set(OPTIM_PY_SKIP "")
if(NOT OPTIM_BUILD_PYTHON)
  set(OPTIM_PY_SKIP "the Python package is not built (-DOPTIM_BUILD_PYTHON=OFF)")
elseif(OPTIM_SANITIZE OR OPTIM_TSAN OR OPTIM_FUZZ)
  set(OPTIM_PY_SKIP "the Python package is not built in sanitizer or fuzz builds")
endif()

# The interpreter: Python3_EXECUTABLE when given, else the first python3 of
# the active virtual environment, PATH and /usr/bin that has NumPy (the
# tests need it), else the first python3 found.
if(NOT OPTIM_PY_SKIP AND NOT Python3_EXECUTABLE)
  find_program(OPTIM_PYTHON3_ON_PATH python3)
  set(candidates)
  if(DEFINED ENV{VIRTUAL_ENV})
    list(APPEND candidates "$ENV{VIRTUAL_ENV}/bin/python3")
  endif()
  list(APPEND candidates ${OPTIM_PYTHON3_ON_PATH} /usr/bin/python3)
  set(first "")
  foreach(c ${candidates})
    if(EXISTS "${c}")
      if(NOT first)
        set(first "${c}")
      endif()
      execute_process(COMMAND "${c}" -c "import numpy" RESULT_VARIABLE r OUTPUT_QUIET ERROR_QUIET)
      if(r EQUAL 0)
        set(first "${c}")
        break()
      endif()
    endif()
  endforeach()
  if(first)
    set(Python3_EXECUTABLE "${first}" CACHE FILEPATH "The Python the package is built for")
  endif()
endif()
if(NOT OPTIM_PY_SKIP)
  find_package(Python3 COMPONENTS Interpreter Development.Module)
  if(NOT Python3_Development.Module_FOUND)
    set(OPTIM_PY_SKIP "no Python headers for ${Python3_EXECUTABLE} (Debian: python3-dev)")
  endif()
endif()

set(OPTIM_PY_DIR ${PROJECT_BINARY_DIR}/python)
if(OPTIM_PY_SKIP)
  message(STATUS "optim: Python package OFF: ${OPTIM_PY_SKIP}")
else()
  message(STATUS "optim: Python package for ${Python3_EXECUTABLE} in ${OPTIM_PY_DIR}/optim")
  # site-packages relative to the install prefix, as a venv and the user
  # site lay it out (posix_prefix: lib/python3.X/site-packages).
  execute_process(COMMAND ${Python3_EXECUTABLE} -c
    "import sysconfig; print(sysconfig.get_path('platlib', 'posix_prefix', vars={'platbase': '/p', 'base': '/p'})[3:])"
    OUTPUT_VARIABLE OPTIM_PY_SITE OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(OPTIM_PYTHON_INSTALL_DIR "${OPTIM_PY_SITE}" CACHE STRING
    "Where `cmake --install` puts the package optim, relative to the prefix")
  file(GLOB OPTIM_PY_C CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/optim/*.c)
  file(GLOB OPTIM_PY_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/optim/*.py)
  add_library(optim_py_obj OBJECT ${OPTIM_PY_C})
  target_link_libraries(optim_py_obj PRIVATE Python3::Module optim_shared)
  set_target_properties(optim_py_obj PROPERTIES C_VISIBILITY_PRESET hidden)
  # Two links of the same objects, each with its final rpath (no empty
  # element, tests/test_rpath.sh): the build tree's finds build/liboptim.so,
  # the installed one the prefix's library directory.
  file(RELATIVE_PATH OPTIM_PY_RPATH "/p/${OPTIM_PYTHON_INSTALL_DIR}/optim" "/p/${CMAKE_INSTALL_LIBDIR}")
  foreach(t optim_py optim_py_install)
    Python3_add_library(${t} MODULE WITH_SOABI $<TARGET_OBJECTS:optim_py_obj>)
    target_link_libraries(${t} PRIVATE optim_shared)
    set_target_properties(${t} PROPERTIES OUTPUT_NAME _optim)
  endforeach()
  set_target_properties(optim_py PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${OPTIM_PY_DIR}/optim
    BUILD_RPATH "\$ORIGIN/../..")
  set_target_properties(optim_py_install PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/python-install/optim
    BUILD_WITH_INSTALL_RPATH ON INSTALL_RPATH "\$ORIGIN/${OPTIM_PY_RPATH}")
  set(outs)
  foreach(f ${OPTIM_PY_FILES})
    get_filename_component(n ${f} NAME)
    add_custom_command(OUTPUT ${OPTIM_PY_DIR}/optim/${n}
      COMMAND ${CMAKE_COMMAND} -E copy_if_different ${f} ${OPTIM_PY_DIR}/optim/${n} DEPENDS ${f})
    list(APPEND outs ${OPTIM_PY_DIR}/optim/${n})
  endforeach()
  add_custom_target(optim_py_files ALL DEPENDS ${outs})
  install(FILES ${OPTIM_PY_FILES} DESTINATION ${OPTIM_PYTHON_INSTALL_DIR}/optim)
  install(TARGETS optim_py_install LIBRARY DESTINATION ${OPTIM_PYTHON_INSTALL_DIR}/optim)
endif()

# One ctest per tests/python/test_*.py, through tests/python/run.py (exit
# 77, skipped, with the reason where NumPy or pytest is missing).
if(OPTIM_BUILD_TESTS)
  file(GLOB OPTIM_PY_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/python/test_*.py)
  foreach(src ${OPTIM_PY_TESTS})
    get_filename_component(name ${src} NAME_WE)
    string(REGEX REPLACE "^test_" "python_" name ${name})
    if(OPTIM_PY_SKIP)
      add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo "SKIP: ${OPTIM_PY_SKIP}")
      set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP: ")
    else()
      add_test(NAME ${name} COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/python/run.py ${src})
      set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT
        "PYTHONPATH=${OPTIM_PY_DIR};PYTHONDONTWRITEBYTECODE=1;OMP_NUM_THREADS=2;OPTIM_CLI=$<TARGET_FILE:optim_cli>;OPTIM_BUILD_DIR=${PROJECT_BINARY_DIR};OPTIM_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
    endif()
  endforeach()
endif()

# examples/python/torch_mlp.py for one epoch with optim's Adam and torch's,
# test accuracies compared (tests/python/check_torch_mlp.py; 77, skipped,
# without torch or the data). About 30 s on 2 loaded cores, so it runs with
# the rest. OMP_WAIT_POLICY=passive: with libgomp's default spinning, torch's
# and optim's idle threads took the cores from each other and from the
# other tests (the same epoch took 77-93 s instead of 15).
if(OPTIM_BUILD_TESTS AND NOT OPTIM_PY_SKIP)
  add_test(NAME python_torch_mlp COMMAND ${Python3_EXECUTABLE}
    ${PROJECT_SOURCE_DIR}/tests/python/check_torch_mlp.py ${PROJECT_SOURCE_DIR}/examples/python/torch_mlp.py)
  set_tests_properties(python_torch_mlp PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "PYTHONPATH=${OPTIM_PY_DIR};PYTHONDONTWRITEBYTECODE=1;OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
endif()
