# Sourced by the side-by-side suites (test/peers/*_test.sh) and benchmarks/peers_bench.sh.
#   peers_setup <gpunode-release-build-dir> [BINARY...]
# sets PEERS_BIN (NVIDIA's binaries, built by test/peers/build.sh: all, or only the BINARYs named), GPUNODE (our binary),
# SIM_LIB (the simulated NVML), SIM_LIBDIR (a folder where libnvidia-ml.so.1 is the simulated
# NVML, for LD_LIBRARY_PATH) and WORK (a temporary folder removed at exit).
# Without Go, or without the Release build, the suite is skipped (exit 77), unless CI=true: then
# that is a failure. The simulated library must come from a build without sanitizers: NVIDIA's Go
# binaries load it, and they do not carry the sanitizer runtime.
peers_skip() {
  if [ "${CI:-}" = true ]; then echo "FAIL: $*" >&2; exit 1; fi
  echo "SKIP: $*" >&2; exit 77
}

peers_setup() {
  local build=$1 here rc=0
  shift
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH=$PATH:/usr/local/go/bin; fi
  PEERS_BIN=$("$here/build.sh" "$@" 2>"${TMPDIR:-/tmp}/peers-build.$$.log" | tail -1) || rc=$?
  if [ "$rc" = 77 ]; then peers_skip "Go is not installed: NVIDIA's components cannot be built"; fi
  if [ "$rc" != 0 ]; then cat "${TMPDIR:-/tmp}/peers-build.$$.log" >&2; echo "FAIL: test/peers/build.sh exited $rc" >&2; exit 1; fi
  rm -f "${TMPDIR:-/tmp}/peers-build.$$.log"
  GPUNODE=$build/bin/gpunode
  SIM_LIB=$build/bin/libgpunode-simnvml.so
  [ -x "$GPUNODE" ] && [ -f "$SIM_LIB" ] ||
    peers_skip "no Release build at $build (cmake --build $build --target gpunode gpunode_simnvml)"
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-peers.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  SIM_LIBDIR=$WORK/simlib
  mkdir -p "$SIM_LIBDIR"
  ln -s "$(readlink -f "$SIM_LIB")" "$SIM_LIBDIR/libnvidia-ml.so.1"
  export PEERS_BIN GPUNODE SIM_LIB SIM_LIBDIR WORK
}
