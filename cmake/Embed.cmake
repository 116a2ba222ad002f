# gpunode_embed(OUTPUT out.cc FILES group=path ...): compiles data files into the binary.
# Each FILES entry is "<group>=<path>"; the generated file defines gpunode::EmbeddedFiles()
# (see src/base/embedded.h). Regenerated whenever one of the files changes.
function(gpunode_embed)
  cmake_parse_arguments(E "" "OUTPUT" "FILES" ${ARGN})
  set(deps)
  foreach(entry ${E_FILES})
    string(REGEX REPLACE "^[^=]*=" "" path "${entry}")
    list(APPEND deps "${path}")
  endforeach()
  string(REPLACE ";" "|" joined "${E_FILES}")
  add_custom_command(
    OUTPUT ${E_OUTPUT}
    COMMAND ${CMAKE_COMMAND} "-DOUTPUT=${E_OUTPUT}" "-DFILES=${joined}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedScript.cmake
    DEPENDS ${deps} ${PROJECT_SOURCE_DIR}/cmake/EmbedScript.cmake
    COMMENT "Embedding data files"
    VERBATIM)
endfunction()
