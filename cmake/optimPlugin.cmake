# optim_add_plugin(NAME SOURCE...): builds lib<NAME>.so, a plugin for the
# `optim` command (optim/plugin.h), linked against liboptim.so so that the
# command and the plugin share one registry of classes. Only the entry point
# optim_plugin_init is exported (hidden visibility). Load it with
#     optim --plugin $<TARGET_FILE:NAME> conformance MyClass
# Available after find_package(optim), and inside optim's own build.
function(optim_add_plugin name)
  if(NOT ARGN)
    message(FATAL_ERROR "optim_add_plugin(${name}): no source files")
  endif()
  if(TARGET optim::optim)
    set(lib optim::optim)
  else()
    message(FATAL_ERROR "optim_add_plugin(${name}): target optim::optim not found; call find_package(optim) first")
  endif()
  add_library(${name} MODULE ${ARGN})
  target_link_libraries(${name} PRIVATE ${lib})
  set_target_properties(${name} PROPERTIES PREFIX "lib" C_VISIBILITY_PRESET hidden)
endfunction()
