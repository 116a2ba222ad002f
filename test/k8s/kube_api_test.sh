#!/usr/bin/env bash
# gpunode's Kubernetes client (src/kube) against the real API server of test/k8s/cluster.sh: runs
# the ApiServer*.* tests of kube_tests with the cluster's admin kubeconfig, then stops the cluster.
# Usage: test/k8s/kube_api_test.sh PATH/TO/kube_tests
# Exit 77 (skipped) without Go or as non-root, unless CI=true: then those are failures.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
tests=${1:?usage: kube_api_test.sh PATH/TO/kube_tests}
skip() {
  if [ "${CI:-}" = true ]; then echo "FAIL: $*"; exit 1; fi
  echo "SKIP: $*"; exit 77
}
[ "$(id -u)" -eq 0 ] || skip "the test cluster runs as root"
command -v go >/dev/null || skip "Go is not installed: it builds the test cluster (test/k8s/build.sh)"
[ -x "$tests" ] || { echo "FAIL: $tests is not built"; exit 1; }
trap '"$src/test/k8s/cluster.sh" down >/dev/null 2>&1 || true' EXIT
"$src/test/k8s/cluster.sh" down >/dev/null 2>&1 || true
env_line=$("$src/test/k8s/cluster.sh" up) || { echo "FAIL: test/k8s/cluster.sh up"; exit 1; }
kubeconfig=${env_line#export KUBECONFIG=}
GPUNODE_TEST_KUBECONFIG=$kubeconfig GPUNODE_TEST_CLUSTER_SH="$src/test/k8s/cluster.sh" "$tests" --gtest_filter='ApiServer*.*'
