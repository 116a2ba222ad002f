# Unity ("jumbo") builds of the libraries whose files share no file-local name, and of the gpunode
# executable (src/cli): CMake compiles each batch of GPUNODE_UNITY_BATCH sources of a target as one
# translation unit, so the headers they all include are parsed, and their inline code generated,
# once per batch instead of once per file. The gain is largest in src/cli: Debian's CLI11 2.1
# (header-only) emits ~100 KB of code into every file that includes CLI/CLI.hpp (its Formatter,
# Config and validators), ~7.6 CPU s per file at -O2 -g on the build machine; nlohmann/json.hpp
# and abseil's status headers are in ~180 of the ~190 sources. Measured in
# benchmarks/results/cold-start-2026-12-03.md.
#
# The folders left out (container, doctor, dra, exporter, fleet, image, kube, upgrade, proto) define
# the same file-local names in several files (anonymous-namespace helpers, constants), which one
# translation unit refuses; scripts/unity-clash.py lists such names for a folder. sim/nvml defines
# its entry points through asm labels (not_supported.cc), which one assembler file cannot hold twice. A file-local name
# added to a listed folder that another file of it also defines fails the unity build with a
# "redefinition" error naming both: rename one, or leave the folder out here.
#
# GPUNODE_UNITY_BUILD=OFF builds every file on its own (smaller rebuilds after editing one file).
option(GPUNODE_UNITY_BUILD "Compile the libraries listed in cmake/Unity.cmake and gpunode's CLI in batches (unity build)" ON)
set(GPUNODE_UNITY_BATCH 8 CACHE STRING "Sources per unity batch (cmake/Unity.cmake)")

function(gpunode_unity_targets)
  if(NOT GPUNODE_UNITY_BUILD)
    return()
  endif()
  foreach(t ${ARGN})
    if(TARGET ${t})
      set_target_properties(${t} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${GPUNODE_UNITY_BATCH})
      # Generated sources stay on their own: build_info.cc changes with every commit, the embedded
      # data and the compat tables with data/, and none of them should recompile a batch of others.
      get_target_property(srcs ${t} SOURCES)
      get_target_property(dir ${t} SOURCE_DIR)
      foreach(s ${srcs})
        if(s MATCHES "^${CMAKE_BINARY_DIR}/")
          set_source_files_properties(${s} DIRECTORY ${dir} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
        endif()
      endforeach()
    endif()
  endforeach()
  # GCC's -Wsubobject-linkage takes a file included by a batch for a header: a class of
  # cublaslt.cc holding a type of its anonymous namespace warns there, so that file stays alone.
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/bench/cublaslt.cc DIRECTORY ${PROJECT_SOURCE_DIR}/src
                              PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()
