# ThreadSanitizer build (OPTIM_TSAN, clang with libomp): the planted race
# that tests/tsan/run.sh must see reported. Not a ctest test: it is meant to
# fail under TSan.
if(OPTIM_TSAN)
  add_executable(tsan_planted_race ${PROJECT_SOURCE_DIR}/tests/tsan/planted_race.c)
  target_link_libraries(tsan_planted_race PRIVATE OpenMP::OpenMP_C)
endif()
