# -Wall -Wextra everywhere in our code; the build must stay free of warnings.
function(gpunode_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                                           -Wno-missing-field-initializers)
  if(GPUNODE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
