# -Wall -Wextra everywhere in our code; the build must stay free of warnings.
function(gpunode_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wshadow=local)
    # GCC 12 at -O2/-O3 warns -Wrestrict inside libstdc++'s std::string::_M_replace for plain
    # assign/insert of a literal (GCC bug 105329, fixed in GCC 13): a false positive in the
    # library header, not in our code, seen only in Release builds.
    if(CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12 AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-Wno-restrict>)
    endif()
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # The ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations on our absl::Mutex members
    # are checked only by clang; a guarded member touched without its lock fails the build.
    target_compile_options(${target} PRIVATE -Wthread-safety -Werror=thread-safety)
  endif()
  if(GPUNODE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
