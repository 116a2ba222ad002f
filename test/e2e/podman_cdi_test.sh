#!/usr/bin/env bash
# ctest label "e2e": a REAL container (podman + runc) gets simulated GPUs through the CDI spec that
# `gpunode cdi generate` writes for a fixture host root whose device nodes are real character
# devices (made with mknod; nothing is opened through them).
#
#   usage: podman_cdi_test.sh PATH/TO/gpunode      (as root; needs podman, runc, busybox-static)
#
# Steps: fixture host root of dgx-h200 (8 GPUs) -> spec with --driver-root = the fixture, so the
# mounts' and device nodes' hostPaths are the fixture's files (the dev root defaults to the driver
# root) -> podman run --device nvidia.com/gpu=... --rootfs
# <busybox root> with the spec's createContainer hooks (create-symlinks, update-ldcache) really run.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin=${1:?usage: $0 PATH/TO/gpunode}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$bin" ] || e2e_fail "$bin: not an executable"
profile=dgx-h200
start=$SECONDS

e2e_require_root
e2e_require_tools podman runc conmon busybox unshare python3 ldconfig
e2e_init

e2e_step "fixture host root of $profile with real device nodes"
host=$E2E_TMP/host
e2e_fixture_root "$bin" "$profile" "$host"
driver_root=$(e2e_fixture_driver_root "$host")
e2e_assert_eq "$(stat -c '%F %t:%T' "$host/dev/nvidia3")" "character special file c3:3" "fixture /dev/nvidia3"

e2e_step "gpunode cdi generate --host-root $host --driver-root $driver_root"
cdi_dir=$E2E_TMP/cdi
mkdir -p "$cdi_dir" "$E2E_TMP/expect"
spec=$cdi_dir/nvidia.yaml
gen=(cdi generate --hook-path "$(e2e_hook_path "$bin")" --driver-root "$driver_root")
e2e_gpunode_fixture "$bin" "$profile" "$host" "${gen[@]}" --output "$spec" 2> "$E2E_TMP/generate.err" ||
  e2e_fail "cdi generate: $(cat "$E2E_TMP/generate.err")"
# The same spec as JSON, for this script to read (python3 has no YAML parser here).
e2e_gpunode_fixture "$bin" "$profile" "$host" "${gen[@]}" --output "$E2E_TMP/expect/nvidia.json" 2>/dev/null ||
  e2e_fail "cdi generate --output nvidia.json"
"$bin" cdi validate "$spec" > /dev/null || e2e_fail "gpunode cdi validate $spec"
e2e_ok "spec written and valid"
grep -q '^  *major: 195$' "$spec" || e2e_fail "the spec carries no major 195 although the fixture's nodes are character devices"
e2e_ok "device nodes carry their numbers (major 195)"

# What the spec promises, as shell lines: "node <dev> <path> <major> <minor>", "mount <host> <ctr>",
# "link <target> <link>", "folder <dir>", "env <NAME=VALUE>", "uuid <index> <GPU-...>".
python3 - "$E2E_TMP/expect/nvidia.json" > "$E2E_TMP/expect/facts" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
devices = {d["name"]: d for d in s["devices"]}
for name, d in devices.items():
    for n in d["containerEdits"].get("deviceNodes", []):
        print("node", name, n["path"], n.get("major", "-"), n.get("minor", "-"))
e = s["containerEdits"]
for n in e.get("deviceNodes", []):
    print("node", "*", n["path"], n.get("major", "-"), n.get("minor", "-"))
for m in e.get("mounts", []):
    print("mount", m["hostPath"], m["containerPath"])
for v in e.get("env", []):
    print("env", v)
for h in e.get("hooks", []):
    a = h["args"]
    for flag, value in zip(a, a[1:]):
        if flag == "--link":
            target, link = value.split("::")
            print("link", target, link)
        if flag == "--folder":
            print("folder", value)
for name, d in devices.items():
    if name.startswith("GPU-"):
        print("uuid", d["containerEdits"]["deviceNodes"][0]["path"].replace("/dev/nvidia", ""), name)
PY
facts=$E2E_TMP/expect/facts
mapfile -t mounts < <(awk '$1 == "mount" {print $2 " " $3}' "$facts")
mapfile -t links < <(awk '$1 == "link" {print $2 " " $3}' "$facts")
mapfile -t folders < <(awk '$1 == "folder" {print $2}' "$facts")
if [ ${#mounts[@]} -eq 0 ] || [ ${#links[@]} -eq 0 ] || [ ${#folders[@]} -eq 0 ]; then
  e2e_fail "the spec has no mounts, links or ldcache folders: $(cat "$facts")"
fi
libcuda=$(printf '%s\n' "${mounts[@]}" | awk '$2 ~ /\/libcuda\.so\.[0-9]+\.[0-9.]+$/ {print $2; exit}')
[ -n "$libcuda" ] || e2e_fail "no libcuda.so.<version> mount in the spec"
for m in "${mounts[@]}"; do
  case "${m%% *}" in "$driver_root"/*) ;; *) e2e_fail "mount hostPath ${m%% *} is not below the driver root $driver_root" ;; esac
done
e2e_ok "${#mounts[@]} mounts below the driver root, ${#links[@]} links, ${#folders[@]} ldcache folders"

e2e_assert_device_nodes_under "$spec" "$driver_root"
"$bin" cdi validate "$spec" > /dev/null || e2e_fail "gpunode cdi validate $spec"
e2e_ok "device nodes have hostPath $driver_root/dev/... (the dev root defaults to the driver root)"

e2e_podman_setup "$cdi_dir"
e2e_busybox_rootfs "$E2E_TMP/busybox"

# new_rootfs NAME: a fresh copy of the busybox root (podman --rootfs uses the directory itself, and
# the hooks write into it, so every run gets its own).
new_rootfs() {
  rm -rf "$E2E_TMP/rootfs-$1"
  cp -a "$E2E_TMP/busybox" "$E2E_TMP/rootfs-$1"
  echo "$E2E_TMP/rootfs-$1"
}

# The report a container prints about what it was given: one fact per line.
# shellcheck disable=SC2016
report='
for n in /dev/nvidia* /dev/nvidia-caps/*; do
  [ -e "$n" ] || continue
  if [ -c "$n" ]; then echo "node $n $(stat -c %t:%T "$n")"; else echo "notchar $n"; fi
done
echo "env NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES-<unset>}"
for f in "$@"; do
  case "$f" in
    mount=*) p=${f#mount=}; echo "sum $p $(md5sum < "$p" | cut -d" " -f1)"
             if ( : >> "$p" ) 2>/dev/null; then echo "writable $p"; else echo "readonly $p"; fi ;;
    link=*) p=${f#link=}; echo "link $p $(readlink "$p" || echo "<none>")" ;;
  esac
done
echo "ldconf $(cat /etc/ld.so.conf.d/00-gpunode-cdi.conf 2>/dev/null | grep -v "^#" | tr "\n" " ")"
echo "ldcache $(head -c 20 /etc/ld.so.cache 2>/dev/null | tr -c "[:alnum:].-" _)"
for n in /dev/nvidia[0-9]*; do
  [ -c "$n" ] || continue
  if err=$(cat "$n" 2>&1 >/dev/null); then echo "open $n ok"; else echo "open $n ${err##*: }"; fi
done
mknod /tmp/foreign c 195 250 && { err=$(cat /tmp/foreign 2>&1 >/dev/null); echo "foreign ${err##*: }"; }
'
report_args=()
for m in "${mounts[@]}"; do report_args+=("mount=${m#* }"); done
for l in "${links[@]}"; do report_args+=("link=${l#* }"); done

# run_report DEVICE...: runs the report in a fresh root with the devices; its output in $out.
run_report() {
  local rootfs dev args=()
  rootfs=$(new_rootfs "$RANDOM")
  for dev in "$@"; do args+=(--device "$dev"); done
  if ! out=$(e2e_podman_run "${args[@]}" --rootfs "$rootfs" /bin/sh -c "$report" report "${report_args[@]}" 2>&1); then
    e2e_fail "podman run ${args[*]} failed:
$out"
  fi
}

expect_hex() {  # "<major> <minor>" -> "c3:0" as busybox stat %t:%T prints it
  printf '%x:%x' "$1" "$2"
}

# check_nodes DEVICE-NAME...: the container has exactly the nodes the spec gives those devices
# plus the control nodes, each with the spec's numbers (= the fixture's).
check_nodes() {
  local want have
  want=$(for d in "$@" "*"; do awk -v d="$d" '$1 == "node" && $2 == d {print $3, $4, $5}' "$facts"; done | sort -u |
           while read -r p ma mi; do echo "node $p $(expect_hex "$ma" "$mi")"; done | sort)
  have=$(grep '^node \|^notchar ' <<< "$out" | sort)
  [ "$have" = "$want" ] || e2e_fail "device nodes for $*: expected
$want
got
$have"
  e2e_ok "device nodes for $*: $(awk '{printf "%s(%s) ", $2, $3}' <<< "$want")"
}

check_common() {
  local m host ctr want l target link f
  e2e_assert_contains "$out" "$(awk '$1 == "env" {print "env " $2; exit}' "$facts")" "env from the spec"
  for m in "${mounts[@]}"; do
    host=${m%% *} ctr=${m#* }
    want=$(md5sum < "$host" | cut -d' ' -f1)
    grep -qxF "sum $ctr $want" <<< "$out" || e2e_fail "mount $ctr: not the content of $host (md5 $want):
$(grep " $ctr" <<< "$out")"
    grep -qxF "readonly $ctr" <<< "$out" || e2e_fail "mount $ctr is writable in the container"
  done
  e2e_ok "${#mounts[@]} driver files mounted read-only with the fixture's content (e.g. $libcuda)"
  for l in "${links[@]}"; do
    target=${l%% *} link=${l#* }
    grep -qxF "link $link $target" <<< "$out" || e2e_fail "create-symlinks hook: $link should point to $target:
$(grep "^link $link " <<< "$out")"
  done
  e2e_ok "create-symlinks hook made ${#links[@]} links ($(dirname "$libcuda")/libcuda.so -> libcuda.so.1 -> $(basename "$libcuda"))"
  f=$(printf '%s ' "${folders[@]}")
  e2e_assert_contains "$out" "ldconf $f" "update-ldcache hook wrote /etc/ld.so.conf.d/00-gpunode-cdi.conf"
  e2e_assert_contains "$out" "ldcache glibc-ld.so.cache1.1" "update-ldcache hook ran ldconfig: /etc/ld.so.cache"
  if grep '^open ' <<< "$out" | grep -q 'Operation not permitted'; then
    e2e_fail "the device cgroup denies a device the container was given:
$(grep '^open ' <<< "$out")"
  fi
  e2e_ok "the device cgroup lets the container open its nodes ($(grep -m1 '^open ' <<< "$out" | cut -d' ' -f3-))"
  e2e_assert_contains "$out" "foreign Operation not permitted" "the device cgroup denies a node the spec did not give (195:250)"
}

e2e_step "podman run --device nvidia.com/gpu=0"
run_report nvidia.com/gpu=0
check_nodes 0
if grep -q '^node /dev/nvidia1 ' <<< "$out"; then e2e_fail "/dev/nvidia1 is in a gpu=0 container"; fi
e2e_ok "/dev/nvidia1 is absent"
check_common

e2e_step "podman run --device nvidia.com/gpu=all"
run_report nvidia.com/gpu=all
check_nodes all
e2e_assert_eq "$(grep -c '^node /dev/nvidia[0-9]' <<< "$out")" 8 "GPU nodes with gpu=all"
check_common

uuid3=$(awk '$1 == "uuid" && $2 == 3 {print $3}' "$facts")
e2e_step "podman run --device nvidia.com/gpu=$uuid3 --device nvidia.com/gpu=5"
run_report "nvidia.com/gpu=$uuid3" nvidia.com/gpu=5
check_nodes "$uuid3" 5

e2e_step "podman run --device nvidia.com/gpu=99 fails"
if out=$(e2e_podman_run --device nvidia.com/gpu=99 --rootfs "$(new_rootfs neg)" /bin/true 2>&1); then
  e2e_fail "podman run --device nvidia.com/gpu=99 succeeded"
fi
e2e_assert_contains "$out" "nvidia.com/gpu=99" "podman names the unknown device ($(tail -n1 <<< "$out"))"

e2e_step "the hooks stay inside the container's root when its folders are symlinks"
# An image whose /usr/lib/x86_64-linux-gnu and /etc/ld.so.conf.d are absolute symlinks to folders
# that exist on the host. In the container they resolve inside its root; the hooks run before
# pivot_root, in the host's view, and must not follow them out.
escape=$E2E_TMP/escape
mkdir -p "$escape/lib" "$escape/ldconf"
rootfs=$(new_rootfs escape)
mkdir -p "$rootfs/usr/lib" "$rootfs/etc"
libdir=$(dirname "$libcuda")
ln -s "$escape/lib" "$rootfs$libdir"
ln -s "$escape/ldconf" "$rootfs/etc/ld.so.conf.d"
if ! out=$(e2e_podman_run --device nvidia.com/gpu=0 --rootfs "$rootfs" /bin/sh -c \
             "readlink $libdir/libcuda.so; cat /etc/ld.so.conf.d/00-gpunode-cdi.conf; exit 0" 2>&1); then
  e2e_fail "podman run with a symlinked library folder failed:
$out"
fi
left=$(cd "$escape" && find . -mindepth 2)
[ -z "$left" ] || e2e_fail "the hooks wrote outside the container's root, in $escape: $left"
e2e_ok "nothing written to the host folders the symlinks name"
e2e_assert_contains "$out" "libcuda.so.1" "libcuda.so made inside the root (through the symlink, as the container sees it)"
e2e_assert_contains "$out" "${folders[0]}" "00-gpunode-cdi.conf written inside the root"

echo "PASS: podman_cdi_test ($((SECONDS - start)) s)"
