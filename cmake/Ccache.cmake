# Use ccache when it is installed: the build machine has two cores, rebuilds must be cheap.
# Paths are made relative to the source tree (CCACHE_BASEDIR, no hash of the build folder), so a
# fresh clone in another folder (CI) or a git worktree reuses what any other checkout compiled.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(_gpunode_ccache ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=true
      ${CCACHE_PROGRAM})
  set(CMAKE_C_COMPILER_LAUNCHER ${_gpunode_ccache})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_gpunode_ccache})
endif()
