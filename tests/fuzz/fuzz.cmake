# The fuzz targets (tests/fuzz/README.md). With OPTIM_FUZZ (clang only) they
# link clang's libFuzzer; otherwise a small runner (standalone.c) replays
# files, so that every build runs the seed corpora and the regression inputs
# as tests.
set(OPTIM_FUZZ_TARGETS config safetensors idx apply checkpoint resume npz)
set(OPTIM_FUZZ_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz)
foreach(t ${OPTIM_FUZZ_TARGETS})
  if(OPTIM_FUZZ)
    add_executable(fuzz_${t} ${OPTIM_FUZZ_DIR}/fuzz_${t}.c ${OPTIM_FUZZ_DIR}/scratch.c)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    set(replay_args -runs=0)
  else()
    add_executable(fuzz_${t} ${OPTIM_FUZZ_DIR}/fuzz_${t}.c ${OPTIM_FUZZ_DIR}/scratch.c
      ${OPTIM_FUZZ_DIR}/standalone.c)
    set(replay_args)
  endif()
  target_link_libraries(fuzz_${t} PRIVATE optim_static)
  target_include_directories(fuzz_${t} PRIVATE ${PROJECT_SOURCE_DIR}/src) # io/safetensors_json.h
  if(OPTIM_BUILD_TESTS)
    add_test(NAME fuzz_${t}_inputs COMMAND fuzz_${t} ${replay_args}
      ${OPTIM_FUZZ_DIR}/corpus/${t} ${OPTIM_FUZZ_DIR}/regressions/${t})
  endif()
endforeach()
