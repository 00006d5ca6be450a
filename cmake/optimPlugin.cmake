# optim_add_plugin(NAME [SOURCE...] [ISA_SOURCES SOURCE...]): builds
# lib<NAME>.so, a plugin for the `optim` command (optim/plugin.h), linked
# against liboptim.so so that the command and the plugin share one registry
# of classes. Only the entry point optim_plugin_init is exported (hidden
# visibility). Load it with
#     optim --plugin $<TARGET_FILE:NAME> conformance MyClass
# Available after find_package(optim), and inside optim's own build.
#
# Flags: the library's (optim_plugin_flags below), so a plugin runs at a
# built-in's speed:
#  - always -fno-math-errno -ffp-contract=off (same bits on every level: no
#    FMA contraction);
#  - -O3 -DNDEBUG (CMake's Release flags) when the project has no build type
#    and no -O in CMAKE_C_FLAGS; a build type (Debug, RelWithDebInfo, ...)
#    or an -O of the user's keeps its own optimisation level. Options added
#    later with target_compile_options(NAME ...) come after these, so they
#    win (GCC and Clang: the last of two conflicting flags counts).
#
# ISA_SOURCES: files compiled once per instruction-set level (optim/isa.h):
# baseline into NAME, and, on x86-64 with a compiler that has the levels,
# again as the object libraries NAME_avx2 (-DOPTIM_ISA_BUILD=1
# -march=x86-64-v3) and NAME_avx512 (-DOPTIM_ISA_BUILD=2 -march=x86-64-v4
# -mprefer-vector-width=512), which take NAME's compile definitions, options
# and include directories. Elsewhere only the baseline build exists, and
# OPTIM_ISA_CLASS picks it.
#
# Rpath: a plugin built against an installed optim finds liboptim.so.0 in
# its lib directory through its rpath, in the build tree and installed.

# optim_plugin_flags(): sets OPTIM_PLUGIN_C_OPTIONS (every plugin source),
# OPTIM_PLUGIN_C_RELEASE (without a build type), OPTIM_PLUGIN_AVX2_OPTIONS
# and OPTIM_PLUGIN_AVX512_OPTIONS (the per-level builds) in the caller's
# scope. optim.pc's sibling optim-plugin.pc carries the same.
function(optim_plugin_flags)
  set(OPTIM_PLUGIN_C_OPTIONS -fno-math-errno -ffp-contract=off PARENT_SCOPE)
  set(OPTIM_PLUGIN_C_RELEASE -O3 -DNDEBUG PARENT_SCOPE)
  set(OPTIM_PLUGIN_AVX2_OPTIONS -DOPTIM_ISA_BUILD=1 -march=x86-64-v3 PARENT_SCOPE)
  set(OPTIM_PLUGIN_AVX512_OPTIONS -DOPTIM_ISA_BUILD=2 -march=x86-64-v4 -mprefer-vector-width=512
    PARENT_SCOPE)
endfunction()

# _optim_plugin_levels(OUT): the levels (avx2, avx512) this compiler builds.
function(_optim_plugin_levels out)
  optim_plugin_flags()
  set(levels)
  foreach(level avx2 avx512)
    string(TOUPPER ${level} up)
    if(NOT DEFINED OPTIM_PLUGIN_HAVE_${up})
      include(CheckCSourceCompiles)
      string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${OPTIM_PLUGIN_${up}_OPTIONS}")
      set(CMAKE_REQUIRED_QUIET ON)
      check_c_source_compiles("
#if !defined(__x86_64__) || !defined(__AVX2__) || (OPTIM_ISA_BUILD == 2 && !defined(__AVX512F__))
#error not an x86-64 level
#endif
int main(void) { return 0; }" OPTIM_PLUGIN_HAVE_${up})
    endif()
    if(OPTIM_PLUGIN_HAVE_${up})
      list(APPEND levels ${level})
    endif()
  endforeach()
  set(${out} ${levels} PARENT_SCOPE)
endfunction()

function(optim_add_plugin name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "ISA_SOURCES")
  set(sources ${arg_UNPARSED_ARGUMENTS} ${arg_ISA_SOURCES})
  if(NOT sources)
    message(FATAL_ERROR "optim_add_plugin(${name}): no source files")
  endif()
  if(NOT TARGET optim::optim)
    message(FATAL_ERROR "optim_add_plugin(${name}): target optim::optim not found; call find_package(optim) first")
  endif()
  optim_plugin_flags()
  add_library(${name} MODULE ${sources})
  target_link_libraries(${name} PRIVATE optim::optim)
  set_target_properties(${name} PROPERTIES PREFIX "lib" C_VISIBILITY_PRESET hidden)
  target_compile_options(${name} PRIVATE ${OPTIM_PLUGIN_C_OPTIONS})
  if(NOT CMAKE_C_FLAGS MATCHES "(^| )-O")
    # $<CONFIG> is empty when the project has no build type
    target_compile_options(${name} PRIVATE "$<$<STREQUAL:$<CONFIG>,>:${OPTIM_PLUGIN_C_RELEASE}>")
  endif()
  get_target_property(imported optim::optim IMPORTED)
  if(imported) # keep the installed liboptim's directory when the plugin is installed
    set_target_properties(${name} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  endif()
  if(NOT arg_ISA_SOURCES)
    return()
  endif()
  _optim_plugin_levels(levels)
  foreach(level ${levels})
    string(TOUPPER ${level} up)
    set(t ${name}_${level})
    add_library(${t} OBJECT ${arg_ISA_SOURCES})
    target_link_libraries(${t} PRIVATE optim::optim)
    set_target_properties(${t} PROPERTIES C_VISIBILITY_PRESET hidden POSITION_INDEPENDENT_CODE ON)
    target_include_directories(${t} PRIVATE $<TARGET_PROPERTY:${name},INCLUDE_DIRECTORIES>)
    target_compile_definitions(${t} PRIVATE $<TARGET_PROPERTY:${name},COMPILE_DEFINITIONS>)
    target_compile_options(${t} PRIVATE $<TARGET_PROPERTY:${name},COMPILE_OPTIONS>
      ${OPTIM_PLUGIN_${up}_OPTIONS})
    target_sources(${name} PRIVATE $<TARGET_OBJECTS:${t}>)
  endforeach()
endfunction()
