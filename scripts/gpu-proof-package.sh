#!/usr/bin/env bash
# Issue 33's package proof on the real GPU machine (through the device tool: Ubuntu 24.04, root,
# dpkg, no systemd, no Docker): the Debian package built here (cmake/Packaging.cmake) installed on a
# host with a real H200, used with NVIDIA's command lines, then purged:
#   1. the host listed (files, links, folders of /etc, /usr/bin, /usr/lib/systemd, the man, doc and
#      completion folders, /var/lib, /run/cdi; contents of /etc and /run/cdi hashed)
#   2. dpkg -i gpunode_<version>_amd64.deb; its files and NVIDIA's names (links to gpunode);
#      systemd does not run: the unit is only marked enabled, nothing started
#   3. gpunode doctor; nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml; nvidia-ctk cdi list
#   4. the agent started by hand from the unit's ExecStart line (the packaged /etc/gpunode/agent.yaml)
#      for a few seconds: /readyz, the exporter's /metrics with the H200's values, the CDI spec its
#      cdi step writes to /var/run/cdi/nvidia.yaml
#   5. dpkg --purge gpunode; the host listed again: it must equal step 1 (dpkg's own database and
#      log are not listed).
#
# The package is built on Debian 12 and Depends on Debian 12's library packages; two of them have
# no package of that name on Ubuntu 24.04 (libcpp-httplib0.11; libssl3 is libssl3t64 there), and
# the GPU machine has no network for apt. So, on that machine only: when a dependency is not
# installed, dpkg -i runs with --force-depends (the missing names are logged) and the installed
# programs find those libraries in .gpubundle/lib (gpu-proof-lib.sh sets LD_LIBRARY_PATH). On
# Debian 12, `apt install ./gpunode_*.deb` resolves them (docs/install-host.md).
#
#   on this machine:   cmake --build build --target gpunode && (cd build && cpack) &&
#                      scripts/bundle-gpu.sh && cp build/gpunode_*_amd64.deb .gpubundle/
#   on the GPU machine (device tool, carry .gpubundle): bash scripts/gpu-proof-package.sh
#   GPUNODE_PROOF_SIMULATE=1 ...: the same on the simulated h200-real (GPUNODE_SIMULATE set for the
#                      installed programs); meant for a throw-away root (a chroot), never a dev machine.
# Output: $OUT/package-proof.tgz and $OUT/package-transcript.txt (default /tmp/gpunode-out), for
# docs/examples/h200/package-33/.
PROOF_NAME=package
. "$(dirname "$0")/gpu-proof-lib.sh"

DEB=${GPUNODE_DEB:-$(ls .gpubundle/gpunode_*.deb 2>/dev/null | head -n 1)}
[ -n "$DEB" ] && [ -f "$DEB" ] || { fail "no package: copy build/gpunode_*.deb into .gpubundle/ (or set GPUNODE_DEB)"; exit 1; }
[ "$(id -u)" = 0 ] || { fail "run as root (dpkg)"; exit 1; }
if [ "$SIM" = 1 ]; then
  # The installed programs run on the simulated node through gpunode's environment variables.
  export GPUNODE_SIMULATE=h200-real
fi
unset GPUNODE_AGENT_CONFIG GPUNODE_HOST_ROOT

# HTTP GET on loopback with bash alone (no curl needed): http_get PORT PATH -> body on stdout.
http_get() {
  local port=$1 path=$2 line
  exec 3<> "/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&3
  IFS= read -r -t 5 line <&3 || { exec 3<&-; return 1; }
  case "$line" in HTTP/1.?\ 200*) ;; *) exec 3<&-; return 1 ;; esac
  while IFS= read -r -t 5 line <&3 && [ "${line%$'\r'}" != "" ]; do :; done
  cat <&3
  exec 3<&-
}

# The host as a sorted list; contents hashed where config lives.
snapshot() {
  local d
  for d in /etc /usr/bin /usr/sbin /usr/lib/systemd /usr/share/man/man1 /usr/share/doc /usr/share/bash-completion \
    /usr/share/zsh /usr/share/fish /var/lib /run/cdi; do
    [ -e "$d" ] || continue
    find "$d" -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /etc/ld.so.cache \) -prune -o \
      -printf '%p %y %m %U:%G %l\n'
  done | LC_ALL=C sort -u
  for d in /etc /run/cdi; do
    [ -d "$d" ] && find "$d" -xdev -path /etc/ld.so.cache -prune -o -type f -print0
  done | LC_ALL=C sort -z | xargs -0 -r sha256sum 2> /dev/null
}

say "preflight"
if dpkg-query -W -f='${Status}' gpunode 2> /dev/null | grep -q installed; then
  fail "gpunode is installed already: this proof wants a host without it"; exit 1
fi
for f in /usr/bin/nvidia-ctk /usr/bin/nvidia-container-runtime /usr/bin/nvidia-container-runtime-hook /etc/cdi/nvidia.yaml \
  /var/run/cdi/nvidia.yaml /etc/gpunode; do
  if [ -e "$f" ] || [ -L "$f" ]; then fail "$f exists: this proof wants a host without it"; exit 1; fi
done
for port in 9400 9401; do
  if http_get "$port" / > /dev/null 2>&1; then fail "127.0.0.1:$port is taken: the packaged agent config uses it"; exit 1; fi
done
(. /etc/os-release && echo "host: $PRETTY_NAME; $(uname -r); systemd running: $([ -d /run/systemd/system ] && echo yes || echo no)") | add
dpkg-deb -I "$DEB" | add
snapshot > "$L/before.txt"
say "host listed: $(grep -c . "$L/before.txt") entries"

say "dpkg -i $(basename "$DEB")"
missing=()
for dep in $(dpkg-deb -f "$DEB" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g'); do
  dpkg-query -W -f='${Status}' "$dep" 2> /dev/null | grep -q 'ok installed' && continue
  # A package that Provides it (Ubuntu's t64 libraries provide the old names of some)
  dpkg-query -W -f='${Provides}\n' 2> /dev/null | tr ',' '\n' | sed 's/(.*)//; s/ //g' | grep -qx "$dep" && continue
  missing+=("$dep")
done
force=()
if [ ${#missing[@]} -gt 0 ]; then
  say "not installed here (built for Debian 12): ${missing[*]}: dpkg -i --force-depends, libraries from .gpubundle/lib"
  force=(--force-depends)
fi
if ! dpkg -i "${force[@]}" "$DEB" > "$L/dpkg-install.txt" 2>&1; then
  add < "$L/dpkg-install.txt"; fail "dpkg -i"; exit 1
fi
add < "$L/dpkg-install.txt"
dpkg -L gpunode > "$L/dpkg-L.txt"
dpkg-deb -c "$DEB" > "$L/deb-contents.txt"
for f in /usr/bin/gpunode /usr/share/man/man1/gpunode.1.gz /usr/share/bash-completion/completions/gpunode \
  /usr/share/zsh/vendor-completions/_gpunode /usr/share/fish/vendor_completions.d/gpunode.fish \
  /usr/lib/systemd/system/gpunode-agent.service /etc/gpunode/agent.yaml; do
  if [ -s "$f" ]; then
    pass "$f"
  elif excl=$(grep -hsE "^path-exclude[= ]+$(dirname "$(dirname "$f")")/" /etc/dpkg/dpkg.cfg.d/* | head -n 1) && [ -n "$excl" ] &&
       grep -q " \.$f\$" "$L/deb-contents.txt"; then
    # Ubuntu's minimized images tell dpkg not to unpack man pages (/etc/dpkg/dpkg.cfg.d/excludes).
    pass "$f in the package; not unpacked here: this host's dpkg config says '$excl'"
  else
    fail "$f missing after dpkg -i"
  fi
done
for n in nvidia-ctk nvidia-container-runtime nvidia-container-runtime-hook; do
  [ "$(readlink "/usr/bin/$n")" = gpunode ] && pass "/usr/bin/$n -> gpunode" || fail "/usr/bin/$n is not a link to gpunode"
done
/usr/bin/gpunode --version 2>&1 | add
[ -d /run/systemd/system ] || say "no systemd here: the unit is marked enabled ($(ls /etc/systemd/system/multi-user.target.wants/gpunode-agent.service 2>&1)), nothing started"

say "gpunode doctor"
/usr/bin/gpunode doctor > "$L/doctor.txt" 2>&1
rc=$?
add < "$L/doctor.txt"
[ $rc -le 1 ] && pass "doctor exit $rc" || fail "doctor exit $rc"

say "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
if nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml > "$L/cdi-generate.txt" 2>&1; then
  add < "$L/cdi-generate.txt"; cp /etc/cdi/nvidia.yaml "$L/etc-cdi-nvidia.yaml"; pass "/etc/cdi/nvidia.yaml written"
else
  add < "$L/cdi-generate.txt"; fail "nvidia-ctk cdi generate"
fi
say "nvidia-ctk cdi list"
# NVIDIA's line reads every spec in /etc/cdi and /var/run/cdi; gpunode's `cdi list` without a file
# reads /var/run/cdi/nvidia.yaml only until nvidia-ctk's command lines (branch k33) are merged: then
# the spec is named once more, so the names are on record either way.
nvidia-ctk cdi list > "$L/cdi-list.txt" 2>&1 || fail "nvidia-ctk cdi list (NVIDIA's line, verbatim)"
add < "$L/cdi-list.txt"
if ! grep -q '^nvidia.com/gpu=all$' "$L/cdi-list.txt"; then
  say "nvidia-ctk cdi list /etc/cdi/nvidia.yaml"
  nvidia-ctk cdi list /etc/cdi/nvidia.yaml >> "$L/cdi-list.txt" 2>&1
  tail -n +1 "$L/cdi-list.txt" | add
fi
grep -q '^nvidia.com/gpu=all$' "$L/cdi-list.txt" && grep -q '^nvidia.com/gpu=0$' "$L/cdi-list.txt" &&
  pass "the spec names nvidia.com/gpu=0 and =all" || fail "no nvidia.com/gpu=0 or =all in the spec"

say "the agent from the unit's ExecStart line"
exec_start=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/gpunode-agent.service)
echo "ExecStart=$exec_start" | add
read -r -a argv <<< "$exec_start"
"${argv[@]}" > "$L/agent.log" 2>&1 &
agent=$!
PIDS+=("$agent")
ready=0
for _ in $(seq 1 60); do
  if http_get 9401 /readyz > "$L/readyz.txt" 2> /dev/null; then ready=1; break; fi
  kill -0 "$agent" 2> /dev/null || break
  sleep 0.5
done
[ $ready = 1 ] && pass "/readyz answered 200" || fail "/readyz not ready: $(cat "$L/readyz.txt" 2> /dev/null)"
add < "$L/readyz.txt"
sleep 2
http_get 9400 /metrics > "$L/metrics.txt" 2> /dev/null || fail "no /metrics on 127.0.0.1:9400"
grep -E '^DCGM_FI_DEV_(GPU_TEMP|FB_USED|POWER_USAGE)\{' "$L/metrics.txt" | head -n 6 | add
grep -q '^DCGM_FI_DEV_GPU_TEMP{' "$L/metrics.txt" && pass "exporter: DCGM_FI_DEV_GPU_TEMP served" ||
  fail "exporter: no DCGM_FI_DEV_GPU_TEMP"
http_get 9401 /metrics 2> /dev/null | grep '^gpunode_component_up' | add
[ -s /var/run/cdi/nvidia.yaml ] && pass "the agent's cdi step wrote /var/run/cdi/nvidia.yaml" ||
  fail "no /var/run/cdi/nvidia.yaml from the agent"
kill -TERM "$agent" 2> /dev/null
wait "$agent" 2> /dev/null
say "agent stopped (exit $?)"
add < "$L/agent.log"

say "dpkg --purge gpunode"
dpkg --purge gpunode > "$L/dpkg-purge.txt" 2>&1 || fail "dpkg --purge"
add < "$L/dpkg-purge.txt"
snapshot > "$L/after.txt"
if diff -u "$L/before.txt" "$L/after.txt" > "$L/host-diff.txt"; then
  pass "the host is as before the install: $(grep -c . "$L/after.txt") entries equal"
else
  add < "$L/host-diff.txt"; fail "the host differs from before the install (host-diff.txt)"
fi
[ "$FAILED" = 0 ] && say "PASS" || say "FAILED"
exit "$FAILED"
