#!/usr/bin/env bash
# The device plugin conformance suite: NVIDIA's device plugin and `gpunode plugin` on the same
# simulated node with the same configuration, asked the same kubelet questions (plugin_probe:
# registration, options, ListAndWatch, GetPreferredAllocation, Allocate), answers compared by
# plugin_compare.py. Every difference must be listed, with its reason, in
# test/peers/plugin_differences.txt (and so in docs/plugin.md); an unlisted difference fails, and
# so does a listed one that no longer occurs.
#
#   plugin_test.sh RELEASE-BUILD-DIR PLUGIN_PROBE [CASE...]
# Needs root (plugin_run.sh uses a private mount namespace); skipped otherwise unless CI=true.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"
[ $# -ge 2 ] || { echo "usage: plugin_test.sh RELEASE-BUILD-DIR PLUGIN_PROBE [CASE...]" >&2; exit 3; }
build=$1 probe=$2
shift 2
[ "$(id -u)" = 0 ] || peers_skip "needs root: NVIDIA's plugin serves /var/lib/kubelet/device-plugins, made private with unshare -m"
command -v unshare >/dev/null || peers_skip "unshare (util-linux) is missing"
[ -x "$probe" ] || { echo "FAIL: no plugin_probe at $probe" >&2; exit 1; }
peers_setup "$build"

# name|profile|flags for both plugins|config file for both (--config-file), see config_of
cases=(
  "default|dgx-h200||"
  "default-l40s|pcie-l40s-4||"
  "default-t4|t4-cloud||"
  "pass-device-specs|dgx-h200|--pass-device-specs=true|"
  "id-index|dgx-h200|--device-id-strategy=index|"
  "volume-mounts|dgx-h200|--device-list-strategy=volume-mounts|"
  "cdi-annotations|dgx-h200|--device-list-strategy=cdi-annotations|"
  "cdi-cri|dgx-h200|--device-list-strategy=cdi-cri|"
  "time-slicing|dgx-h200||time-slicing-4"
  "time-slicing-renamed|pcie-l40s-4||time-slicing-renamed"
  "mig-single|a100-mig|--mig-strategy=single|"
  "mig-mixed|a100-mig|--mig-strategy=mixed|"
)

config_of() {
  case $1 in
    time-slicing-4) cat <<'YAML' ;;
version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
YAML
    time-slicing-renamed) cat <<'YAML' ;;
version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 2
YAML
    *) echo "plugin_test: no config $1" >&2; exit 3 ;;
  esac
}

only=("$@")
found=$WORK/found.tsv
: > "$found"
for c in "${cases[@]}"; do
  IFS='|' read -r name profile flags config <<<"$c"
  if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]]; then continue; fi
  dir=$WORK/$name
  mkdir -p "$dir"
  "$GPUNODE" sim hostroot "$profile" "$dir/root" --device-nodes --profile-file "$dir/profile.yaml" -q
  args=()
  # shellcheck disable=SC2206
  [ -n "$flags" ] && args=($flags)
  if [ -n "$config" ]; then
    config_of "$config" > "$dir/config.yaml"
    args+=("--config-file=$dir/config.yaml")
  fi
  for who in nvidia gpunode; do
    if ! "$here/plugin_run.sh" "$who" "$dir/root" "$dir/profile.yaml" "$probe" -- ${args[@]+"${args[@]}"} > "$dir/$who.json" 2> "$dir/$who.err"; then
      # A plugin that refuses to start (a configuration it rejects) is an answer too: compared as
      # "refused to start", with its last words.
      if grep -q "exited before the probe finished" "$dir/$who.err"; then
        python3 -c 'import json,sys; print(json.dumps({"start_error": sys.argv[1]}))' \
          "$(grep -v '^plugin_run:' "$dir/$who.err" | grep -v '^ *$' | tail -n 1)" > "$dir/$who.json"
      else
        echo "FAIL: $name: the $who plugin did not answer:" >&2
        cat "$dir/$who.err" >&2
        exit 1
      fi
    fi
  done
  python3 "$here/plugin_compare.py" "$name" "$dir/nvidia.json" "$dir/gpunode.json" \
    --sim-lib "$SIM_LIB" --profile "$dir/profile.yaml" --roots "$dir/root" >> "$found"
done
[ -n "${PLUGIN_TEST_KEEP:-}" ] && cp -r "$WORK/." "$PLUGIN_TEST_KEEP/"
python3 "$here/expect_differences.py" "$here/plugin_differences.txt" "$found" ${only[@]+--cases "${only[@]}"}
