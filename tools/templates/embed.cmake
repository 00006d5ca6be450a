# Writes OUT, a C file holding the project `optim new-plugin` writes: each
# template of this directory as an array of lines (no literal longer than a
# line), with the name of the file it becomes. "TemplateName" in names and
# text is the plugin's NAME, put in by the command (tools/new_plugin.c).
#     cmake -DOUT=path/new_plugin_templates.c -P embed.cmake
# Each pair: template, the file it becomes in the new project.
set(pairs
  plugin.c TemplateName.c
  CMakeLists.txt.in CMakeLists.txt
  README.md.in README.md
  reference.py.in reference.py)
if(NOT OUT)
  message(FATAL_ERROR "embed.cmake: set OUT")
endif()
set(code "/* Generated from tools/templates by tools/templates/embed.cmake: do not edit. */\n")
string(APPEND code "#include <stddef.h>\n\n#include \"new_plugin.h\"\n\n")
set(table "")
set(i 0)
list(LENGTH pairs n)
while(i LESS n)
  list(GET pairs ${i} src)
  math(EXPR j "${i} + 1")
  list(GET pairs ${j} dest)
  file(READ ${CMAKE_CURRENT_LIST_DIR}/${src} text)
  if(text MATCHES "\r")
    message(FATAL_ERROR "embed.cmake: ${src} has a carriage return")
  endif()
  if(NOT text MATCHES "\n$")
    message(FATAL_ERROR "embed.cmake: ${src} does not end with a newline")
  endif()
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "?" "\\?" text "${text}") # no trigraphs under -std=c11
  string(REGEX REPLACE "\n$" "" text "${text}")
  string(REPLACE "\n" "\\n\",\n    \"" text "${text}")
  string(APPEND code "static const char *const lines_${i}[] = {\n    \"${text}\\n\",\n    NULL};\n\n")
  string(APPEND table "    {\"${dest}\", lines_${i}},\n")
  math(EXPR i "${i} + 2")
endwhile()
string(APPEND code "const optim_np_template optim_np_templates[] = {\n${table}    {NULL, NULL}};\n")
file(WRITE ${OUT} "${code}")
