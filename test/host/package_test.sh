#!/usr/bin/env bash
# ctest label "package": the Debian package (cmake/Packaging.cmake) built from this build tree and
# installed with dpkg into a clean Debian 12 root (a chroot), then purged: the root must be as it was.
#
#   1. `cpack` makes gpunode_<version>_<arch>.deb from BUILD (gpunode must be built); lintian when
#      present (no error or warning).
#   2. A minbase root of the suite (mmdebstrap --variant=minbase, from the machine's apt mirror, plus
#      systemd and the libraries the package Depends on, so dpkg -i needs no network) is cached as a tarball in
#      ~/.cache/gpunode/host-root/<suite>-<hash of the package list>.tar and unpacked afresh.
#      The root gets what a host may have before gpunode: an /etc/docker/daemon.json of its own.
#   3. dpkg refuses gpunode beside a stand-in of NVIDIA's nvidia-container-toolkit-base (Conflicts),
#      and preinst refuses it over a /usr/bin/nvidia-container-runtime that no package owns; both
#      programs stay as they were. Then (after the root is listed) dpkg -i in the chroot: files, the links under NVIDIA's names, the conffile, the unit enabled by
#      deb-systemd-helper though systemd does not run there; `systemd-analyze verify --root` of the
#      unit; `gpunode agent --config /etc/gpunode/agent.yaml --print-config` accepts the conffile.
#   4. In the chroot, NVIDIA's command lines: `nvidia-ctk runtime configure --runtime=docker` (and
#      again with --set-as-default), `--runtime=containerd` (no config before: created); the configs
#      and their backups checked; `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` on the
#      simulated dgx-h200 (the simulated NVML from BUILD, copied into the root's /tmp).
#   5. dpkg --purge; every file, link and folder of the root (type, mode, owner, link target, content
#      hash) compared with the list taken before step 3. dpkg's own database (/var/lib/dpkg) and log
#      (/var/log/dpkg.log, /var/log/alternatives.log) are left out of the comparison: they record the
#      install; gpunode's entry in dpkg's status is checked to be gone.
#
#   usage: package_test.sh BUILD_DIR     (as root; needs dpkg-deb, mmdebstrap, systemd-analyze)
# Environment: GPUNODE_HOST_SUITE (default bookworm), GPUNODE_HOST_MIRROR (default: the first Debian
# URI of /etc/apt), GPUNODE_HOST_CACHE (default ~/.cache/gpunode/host-root).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"

build=${1:?usage: $0 BUILD_DIR}
build=$(cd "$build" && pwd)
[ -x "$build/bin/gpunode" ] || e2e_fail "$build/bin/gpunode: not built (cmake --build $build --target gpunode)"
[ -f "$build/CPackConfig.cmake" ] || e2e_fail "$build/CPackConfig.cmake missing: configure $build with cmake first"
e2e_require_root
e2e_require_tools cpack dpkg-deb mmdebstrap systemd-analyze chroot sha256sum
e2e_init
t0=$(date +%s)

suite=${GPUNODE_HOST_SUITE:-bookworm}
mirror=${GPUNODE_HOST_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
  [ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\/debian\)\/* .*/\2/p' /etc/apt/sources.list 2>/dev/null | head -n 1)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
fi
cache=${GPUNODE_HOST_CACHE:-$HOME/.cache/gpunode/host-root}

e2e_step "the package from $build (cpack)"
pkgdir=$E2E_TMP/pkg
cpack --config "$build/CPackConfig.cmake" -B "$pkgdir" > "$E2E_TMP/cpack.log" 2>&1 ||
  e2e_fail "cpack: $(tail -n 20 "$E2E_TMP/cpack.log")"
deb=$(ls "$pkgdir"/gpunode_*_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || e2e_fail "cpack wrote no gpunode_*.deb: $(cat "$E2E_TMP/cpack.log")"
version=$(dpkg-deb -f "$deb" Version)
arch=$(dpkg-deb -f "$deb" Architecture)
e2e_assert_eq "$(basename "$deb")" "gpunode_${version}_${arch}.deb" "Debian's file name"
e2e_assert_contains "$(dpkg-deb -f "$deb" Conflicts)" "nvidia-container-toolkit-base" "Conflicts names NVIDIA's packages"
e2e_assert_eq "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)" "/etc/gpunode/agent.yaml" "the conffile"
if command -v lintian > /dev/null; then
  # --fail-on error,warning: lintian's exit status says whether anything but info tags was found.
  lint=$(lintian --fail-on error,warning "$deb" 2>&1) || e2e_fail "lintian: $lint"
  e2e_ok "lintian: no error or warning"
else
  e2e_fail "lintian missing: scripts/install-deps.sh installs it (the test set)"
fi

# The libraries the package needs, installed into the cached root so that dpkg -i works offline.
# systemd too (not running: a chroot), as on a GPU host: systemd-analyze verify --root needs its units.
depends=$( (dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g'; echo systemd) | grep . | sort -u | paste -sd, -)
key=$(printf '%s %s %s\n' "$suite" "$mirror" "$depends" | sha256sum | cut -c1-12)
tarball=$cache/$suite-minbase-$key.tar
if [ ! -f "$tarball" ] || [ ! -s "$tarball" ]; then
  e2e_step "clean $suite root (mmdebstrap --variant=minbase from $mirror, with $depends): cached as $tarball"
  mkdir -p "$cache"
  s=$(date +%s)
  partial=$cache/.partial-$suite-$key-$$.tar
  mmdebstrap --quiet --variant=minbase --format=tar --include="$depends" "$suite" "$partial" "$mirror" \
    > "$E2E_TMP/mmdebstrap.log" 2>&1 || { rm -rf "$partial"; e2e_fail "mmdebstrap: $(tail -n 20 "$E2E_TMP/mmdebstrap.log")"; }
  mv "$partial" "$tarball"
  # Roots for other package lists of this suite are stale now.
  find "$cache" -maxdepth 1 -name "$suite-minbase-*.tar" ! -name "$(basename "$tarball")" -delete
  e2e_ok "root made in $(($(date +%s) - s)) s"
fi
R=$E2E_TMP/root
mkdir -p "$R"
s=$(date +%s)
tar -C "$R" --numeric-owner -xpf "$tarball" || e2e_fail "unpack $tarball"
e2e_ok "root unpacked in $(($(date +%s) - s)) s ($(du -sm "$R" | cut -f1) MiB)"
mount -t proc proc "$R/proc" || e2e_fail "mount proc in the root"
e2e_on_exit umount -l "$R/proc"
in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root chroot "$R" "$@"; }

# A host's own Docker config before gpunode (Docker is not installed: only its file matters here).
mkdir -p "$R/etc/docker"
printf '{\n  "log-driver": "journald",\n  "data-root": "/srv/docker"\n}\n' > "$R/etc/docker/daemon.json"
docker_before=$(cat "$R/etc/docker/daemon.json")

e2e_step "NVIDIA's programs are never replaced"
# A stand-in for NVIDIA's package (its name and its /usr/bin/nvidia-ctk): dpkg must refuse gpunode.
fake=$E2E_TMP/fake-nvidia
mkdir -p "$fake/DEBIAN" "$fake/usr/bin"
printf 'Package: nvidia-container-toolkit-base\nVersion: 1.18.2-1\nArchitecture: all\nMaintainer: test <test@localhost>\nDescription: stand-in for the conflict test\n' \
  > "$fake/DEBIAN/control"
printf '#!/bin/sh\necho NVIDIA\n' > "$fake/usr/bin/nvidia-ctk"
chmod 0755 "$fake/usr/bin/nvidia-ctk"
dpkg-deb --root-owner-group -b "$fake" "$R/tmp/fake-nvidia.deb" > /dev/null || e2e_fail "dpkg-deb -b of the stand-in"
cp "$deb" "$R/tmp/gpunode.deb"
in_root dpkg -i /tmp/fake-nvidia.deb > /dev/null 2>&1 || e2e_fail "dpkg -i of the stand-in"
if out=$(in_root dpkg -i /tmp/gpunode.deb 2>&1); then e2e_fail "dpkg -i gpunode beside nvidia-container-toolkit-base succeeded"; fi
e2e_assert_contains "$out" "conflicts with nvidia-container-toolkit-base" "dpkg refuses gpunode beside NVIDIA's package"
e2e_assert_eq "$(in_root nvidia-ctk)" NVIDIA "NVIDIA's /usr/bin/nvidia-ctk untouched"
in_root dpkg --purge nvidia-container-toolkit-base gpunode > /dev/null 2>&1 || e2e_fail "purge of the stand-in"
# A program under NVIDIA's name that no package owns (a toolkit copied in by hand): preinst refuses.
printf '#!/bin/sh\necho by hand\n' > "$R/usr/bin/nvidia-container-runtime"
chmod 0755 "$R/usr/bin/nvidia-container-runtime"
if out=$(in_root dpkg -i /tmp/gpunode.deb 2>&1); then e2e_fail "dpkg -i gpunode over an unowned nvidia-container-runtime succeeded"; fi
e2e_assert_contains "$out" "/usr/bin/nvidia-container-runtime exists and belongs to no package" "preinst refuses an unowned program"
e2e_assert_eq "$(in_root nvidia-container-runtime)" "by hand" "that program untouched"
in_root dpkg --purge gpunode > /dev/null 2>&1 || e2e_fail "purge after the refused install"
rm -f "$R/usr/bin/nvidia-container-runtime" "$R/tmp/fake-nvidia.deb" "$R/tmp/gpunode.deb"

# The root as a sorted list: path, type, mode, owner, link target, and a hash of each file's content.
snapshot() {
  (cd "$R" && find . -xdev \( -path ./proc -o -path ./var/lib/dpkg -o -path ./var/log/dpkg.log \
      -o -path ./var/log/alternatives.log -o -path ./var/cache/ldconfig \) -prune -o \
      -printf '%p %y %m %U:%G %l\n' | LC_ALL=C sort)
  (cd "$R" && find . -xdev \( -path ./proc -o -path ./var/lib/dpkg -o -path ./var/log/dpkg.log \
      -o -path ./var/log/alternatives.log -o -path ./var/cache/ldconfig \) -prune -o -type f -print0 |
      LC_ALL=C sort -z | xargs -0 sha256sum)
}
snapshot > "$E2E_TMP/before.txt"
e2e_ok "root listed before the install: $(grep -c . "$E2E_TMP/before.txt") entries"

e2e_step "dpkg -i in the root (systemd installed, not running)"
cp "$deb" "$R/tmp/gpunode.deb"
s=$(date +%s)
in_root dpkg -i /tmp/gpunode.deb > "$E2E_TMP/install.log" 2>&1 || e2e_fail "dpkg -i: $(cat "$E2E_TMP/install.log")"
rm -f "$R/tmp/gpunode.deb"
e2e_ok "installed in $(($(date +%s) - s)) s"
for f in /usr/bin/gpunode /usr/share/man/man1/gpunode.1.gz /usr/share/bash-completion/completions/gpunode \
  /usr/share/zsh/vendor-completions/_gpunode /usr/share/fish/vendor_completions.d/gpunode.fish \
  /usr/lib/systemd/system/gpunode-agent.service /etc/gpunode/agent.yaml /usr/share/doc/gpunode/copyright; do
  [ -s "$R$f" ] || e2e_fail "$f missing or empty after the install"
done
e2e_ok "program, man page, completions, unit, config and copyright installed"
for n in nvidia-ctk nvidia-container-runtime nvidia-container-runtime-hook; do
  e2e_assert_eq "$(readlink "$R/usr/bin/$n")" gpunode "/usr/bin/$n is a link to gpunode"
done
e2e_assert_contains "$(in_root gpunode --version)" "gpunode $version" "the installed gpunode runs in the root"
# gpunode under NVIDIA's name: its help names the runtime command (CLI11's help before nvidia-ctk's
# command lines, nvidia-ctk's own layout after).
help=$(in_root nvidia-ctk --help 2>&1) || e2e_fail "nvidia-ctk --help: $help"
e2e_assert_contains "$help" "runtime" "nvidia-ctk --help answers"
grep -q '^\.TH GPUNODE' < <(zcat "$R/usr/share/man/man1/gpunode.1.gz") || e2e_fail "gpunode.1.gz is not a man page"
e2e_ok "gpunode.1.gz is a man page (.TH GPUNODE)"
e2e_assert_eq "$(readlink "$R/etc/systemd/system/multi-user.target.wants/gpunode-agent.service")" \
  /lib/systemd/system/gpunode-agent.service "enabled by deb-systemd-helper (systemd does not run: not started)"
e2e_assert_eq "$(in_root dpkg-query -W -f='${Conffiles}' gpunode | awk 'NF {print $1}')" /etc/gpunode/agent.yaml \
  "dpkg knows the conffile"
in_root gpunode agent --config /etc/gpunode/agent.yaml --print-config -o json > "$E2E_TMP/agent.json" 2>&1 ||
  e2e_fail "gpunode agent does not accept the packaged config: $(cat "$E2E_TMP/agent.json")"
python3 - "$E2E_TMP/agent.json" << 'EOF' || e2e_fail "the packaged agent config: $(cat "$E2E_TMP/agent.json")"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["kubernetes"]["enabled"] is False, "kubernetes must be off"
assert c["cdi"]["enabled"] is True and c["cdi"]["args"][-1] == "/var/run/cdi/nvidia.yaml", c["cdi"]
for off in ("plugin", "labels", "dra", "runtime"):
    assert c[off]["enabled"] is False, off
assert c["exporter"]["enabled"] and c["validator"]["enabled"]
EOF
e2e_ok "gpunode agent accepts /etc/gpunode/agent.yaml: no Kubernetes; cdi, validator, exporter on"
verify=$(SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no --root="$R" /usr/lib/systemd/system/gpunode-agent.service 2>&1) ||
  e2e_fail "systemd-analyze verify: $verify"
[ -z "$verify" ] || e2e_fail "systemd-analyze verify printed: $verify"
e2e_ok "systemd-analyze verify --root: clean"
exec_start=$(sed -n 's/^ExecStart=//p' "$R/usr/lib/systemd/system/gpunode-agent.service")
e2e_assert_eq "$exec_start" "/usr/bin/gpunode agent --config /etc/gpunode/agent.yaml" "the unit's ExecStart"

e2e_step "NVIDIA's command lines in the root"
out=$(in_root nvidia-ctk runtime configure --runtime=docker 2>&1) || e2e_fail "nvidia-ctk runtime configure --runtime=docker: $out"
python3 - "$R/etc/docker/daemon.json" << 'EOF' || e2e_fail "daemon.json after configure: $(cat "$R/etc/docker/daemon.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime", d
assert d["log-driver"] == "journald" and d["data-root"] == "/srv/docker", "the host's keys must stay"
EOF
e2e_ok "daemon.json: the nvidia runtime added, the host's keys kept"
ls "$R"/var/lib/gpunode/backups/etc/docker/daemon.json.* > /dev/null 2>&1 || e2e_fail "no backup of daemon.json"
e2e_assert_eq "$(cat "$(ls "$R"/var/lib/gpunode/backups/etc/docker/daemon.json.* | head -n 1)")" "$docker_before" \
  "the backup holds the host's daemon.json"
out=$(in_root nvidia-ctk runtime configure --runtime=docker --set-as-default 2>&1) ||
  e2e_fail "nvidia-ctk runtime configure --runtime=docker --set-as-default: $out"
e2e_assert_contains "$(cat "$R/etc/docker/daemon.json")" '"default-runtime": "nvidia"' "--set-as-default: a second change, a second backup"
out=$(in_root nvidia-ctk runtime configure --runtime=containerd 2>&1) || e2e_fail "nvidia-ctk runtime configure --runtime=containerd: $out"
[ -s "$R/etc/containerd/config.toml" ] || e2e_fail "containerd's config.toml not written: $out"
ls "$R"/var/lib/gpunode/backups/etc/containerd/config.toml.*.absent > /dev/null 2>&1 || e2e_fail "no .absent backup of config.toml"
e2e_ok "containerd's config.toml created (backup: it did not exist)"
# The CDI spec on the simulated dgx-h200: the simulated NVML and its libraries go to the root's /tmp.
sim=$R/tmp/gpunode-sim
mkdir -p "$sim/lib"
cp "$build/bin/libgpunode-simnvml.so" "$sim/" || e2e_fail "$build/bin/libgpunode-simnvml.so missing (cmake --build $build --target gpunode_simnvml)"
for lib in $(ldd "$build/bin/libgpunode-simnvml.so" | awk '/=>/ {print $3}'); do cp -L "$lib" "$sim/lib/"; done
out=$(env -i PATH=/usr/sbin:/usr/bin LD_LIBRARY_PATH=/tmp/gpunode-sim/lib GPUNODE_SIM_LIBRARY=/tmp/gpunode-sim/libgpunode-simnvml.so \
  chroot "$R" nvidia-ctk --simulate dgx-h200 cdi generate --output=/etc/cdi/nvidia.yaml 2>&1) ||
  e2e_fail "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml: $out"
rm -rf "$sim"
grep -q 'path: "/usr/bin/gpunode"' "$R/etc/cdi/nvidia.yaml" || e2e_fail "the spec's hooks do not run /usr/bin/gpunode: $(grep -m3 'path:' "$R/etc/cdi/nvidia.yaml")"
e2e_ok "/etc/cdi/nvidia.yaml written; its hooks run /usr/bin/gpunode"

e2e_step "dpkg --purge gpunode"
in_root dpkg --purge gpunode > "$E2E_TMP/purge.log" 2>&1 || e2e_fail "dpkg --purge: $(cat "$E2E_TMP/purge.log")"
sed 's/^/  | /' "$E2E_TMP/purge.log"
if grep -q installed < <(in_root dpkg-query -W -f='${Status}\n' gpunode 2> /dev/null); then
  e2e_fail "gpunode still in dpkg's status after the purge"
fi
ls "$R"/var/lib/dpkg/info/gpunode.* > /dev/null 2>&1 && e2e_fail "dpkg's info files of gpunode left: $(ls "$R"/var/lib/dpkg/info/gpunode.*)"
e2e_assert_eq "$(cat "$R/etc/docker/daemon.json")" "$docker_before" "daemon.json is the host's again"
snapshot > "$E2E_TMP/after.txt"
if ! diff -u "$E2E_TMP/before.txt" "$E2E_TMP/after.txt" > "$E2E_TMP/diff.txt"; then
  e2e_fail "the root differs from before the install: $(head -n 40 "$E2E_TMP/diff.txt")"
fi
e2e_ok "the root is as before the install: $(grep -c . "$E2E_TMP/after.txt") entries, contents and modes equal"
echo "PASS: package_test ($(($(date +%s) - t0)) s)"
