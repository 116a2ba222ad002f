#!/usr/bin/env bash
# On a machine with NVIDIA's driver: does our simulated NVML export every nvml* entry point that the
# real libnvidia-ml.so.1 exports? NVIDIA's Go components (device plugin, gpu-feature-discovery,
# nvidia-ctk) bind NVML lazily, so a name they call that the simulated library lacks kills them
# with "symbol lookup error"; the simulator exports every nvml.h entry point (generated weak
# NOT_SUPPORTED stubs, sim/nvml/not_supported.cc), and this checks that nothing the real driver
# exports is missing.
#
#   bash scripts/gpu-nvml-exports.sh <path-to-our-libgpunode-simnvml.so> [nvml_entry_points.inc]
#
# The real library is the libnvidia-ml.so.1 that `ldconfig -p` names (or $NVML_REAL_LIB). It also
# compares the real exports with the nvml.h list (sim/nvml/nvml_entry_points.inc beside this
# script, or the second argument): names the driver exports that the header does not declare
# (internal or legacy symbols) and the reverse.
#
# Exit 0 when every nvml* name the real library exports is in ours or in ACCEPTED below (with a
# reason), 1 when some are missing (listed), 2 on bad input. Needs bash and binutils (nm or
# readelf), or python3 (reads the ELF dynamic symbol table itself).
set -euo pipefail

# nvml* names the real library exports that ours may lack: "name reason...". Empty until a run on
# a real driver shows which symbols outside nvml.h it exports and someone decides about each.
ACCEPTED=(
)

die() { echo "gpu-nvml-exports: error: $*" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: bash $0 <path-to-our-libgpunode-simnvml.so> [nvml_entry_points.inc]"
ours=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
inc=${2:-$here/../sim/nvml/nvml_entry_points.inc}
[ -f "$ours" ] || die "our library '$ours' does not exist"

real=${NVML_REAL_LIB:-}
if [ -z "$real" ]; then
  ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
  [ -x "$ldconfig" ] || die "no ldconfig to find libnvidia-ml.so.1 (set NVML_REAL_LIB=/path/to/libnvidia-ml.so.1)"
  real=$("$ldconfig" -p | awk '$1 == "libnvidia-ml.so.1" && /x86-64|AArch64/ {print $NF; exit}')
  [ -n "$real" ] || real=$("$ldconfig" -p | awk '$1 == "libnvidia-ml.so.1" {print $NF; exit}')
  [ -n "$real" ] || die "ldconfig -p knows no libnvidia-ml.so.1: is NVIDIA's driver installed? (or set NVML_REAL_LIB)"
fi
[ -f "$real" ] || die "the real library '$real' does not exist"
if [ "$(readlink -f "$real")" = "$(readlink -f "$ours")" ]; then
  die "'$real' is our own library: the real driver's libnvidia-ml.so.1 is needed"
fi
if grep -qa gpunode-simnvml "$(readlink -f "$real")"; then
  die "'$real' ($(readlink -f "$real")) is the simulated NVML, not NVIDIA's driver"
fi

# The defined, exported symbol names of an ELF shared library, one per line, sorted.
exports() {
  local lib=$1
  if command -v nm >/dev/null; then
    nm -D --defined-only "$lib" | awk 'NF >= 3 {print $3}'
  elif command -v readelf >/dev/null; then
    readelf --dyn-syms -W "$lib" |
      awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && NF >= 8 {print $8}'
  elif command -v python3 >/dev/null; then
    python3 - "$lib" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
if data[:4] != b"\x7fELF" or data[4] != 2:
    sys.exit("%s: not an ELF64 file" % sys.argv[1])
end = "<" if data[5] == 1 else ">"
shoff, = struct.unpack_from(end + "Q", data, 0x28)
shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3a)
def section(i):  # type, offset, size, link, entsize
    f = struct.unpack_from(end + "IIQQQQIIQQ", data, shoff + i * shentsize)
    return f[1], f[4], f[5], f[6], f[9]
for i in range(shnum):
    typ, off, size, link, entsize = section(i)
    if typ != 11:  # SHT_DYNSYM
        continue
    stroff = section(link)[1]
    for s in range(off, off + size, entsize or 24):
        name, info, _, shndx = struct.unpack_from(end + "IBBH", data, s)
        if shndx == 0 or (info >> 4) not in (1, 2):  # undefined; not GLOBAL/WEAK
            continue
        print(data[stroff + name:data.index(b"\0", stroff + name)].decode())
PY
  else
    die "neither nm, readelf nor python3 is installed"
  fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
exports "$real" | sed 's/@.*//' | grep '^nvml' | sort -u >"$tmp/real" || true
exports "$ours" | sed 's/@.*//' | grep '^nvml' | sort -u >"$tmp/ours" || true
[ -s "$tmp/real" ] || die "no nvml* symbols read from $real"
[ -s "$tmp/ours" ] || die "no nvml* symbols read from $ours"
: >"$tmp/accepted"
for a in "${ACCEPTED[@]}"; do
  echo "${a%% *}" >>"$tmp/accepted"
done
sort -u -o "$tmp/accepted" "$tmp/accepted"

comm -23 "$tmp/real" "$tmp/ours" >"$tmp/real_only"
comm -13 "$tmp/real" "$tmp/ours" >"$tmp/ours_only"
comm -23 "$tmp/real_only" "$tmp/accepted" >"$tmp/missing"

echo "real library: $real -> $(readlink -f "$real")"
echo "our library:  $ours"
echo "nvml* exports: real $(wc -l <"$tmp/real"), ours $(wc -l <"$tmp/ours"), in both $(comm -12 "$tmp/real" "$tmp/ours" | wc -l)"
echo
echo "== real only: $(wc -l <"$tmp/real_only") (accepted $(comm -12 "$tmp/real_only" "$tmp/accepted" | wc -l), missing from ours $(wc -l <"$tmp/missing"))"
while read -r name; do
  reason=
  for a in "${ACCEPTED[@]}"; do [ "${a%% *}" = "$name" ] && reason=${a#* }; done
  if [ -n "$reason" ]; then echo "  accepted  $name  ($reason)"; else echo "  MISSING   $name"; fi
done <"$tmp/real_only"
echo
echo "== ours only: $(wc -l <"$tmp/ours_only") (declared by nvml.h but not exported by this driver, or ours alone)"
sed 's/^/  /' "$tmp/ours_only"

if [ -f "$inc" ]; then
  sed -n 's/^GPUNODE_NVML_ENTRY([a-z]*, \(nvml[A-Za-z0-9_]*\))$/\1/p' "$inc" | sort -u >"$tmp/header"
  echo
  echo "== against the nvml.h list ($inc: $(head -1 "$inc" | sed 's/.* from nvml.h \(.*\); do not edit/\1/'), $(wc -l <"$tmp/header") names)"
  echo "-- exported by the real library, not declared in nvml.h: $(comm -23 "$tmp/real" "$tmp/header" | wc -l)"
  comm -23 "$tmp/real" "$tmp/header" | sed 's/^/  /'
  echo "-- declared in nvml.h, not exported by the real library: $(comm -13 "$tmp/real" "$tmp/header" | wc -l)"
  comm -13 "$tmp/real" "$tmp/header" | sed 's/^/  /'
  echo "-- declared in nvml.h, not exported by ours: $(comm -23 "$tmp/header" "$tmp/ours" | wc -l)"
  comm -23 "$tmp/header" "$tmp/ours" | sed 's/^/  /'
else
  echo
  echo "(no nvml.h list at $inc: give sim/nvml/nvml_entry_points.inc as the second argument to compare with it)"
fi

echo
if [ -s "$tmp/missing" ]; then
  echo "FAIL: $(wc -l <"$tmp/missing") nvml* name(s) the real library exports are missing from ours (MISSING above):"
  echo "      a peer that calls one dies with 'symbol lookup error'. Add them to nvml.h's list, or to"
  echo "      ACCEPTED in $0 with the reason."
  exit 1
fi
echo "PASS: every nvml* name the real library exports is in ours ($(wc -l <"$tmp/real") names)"
