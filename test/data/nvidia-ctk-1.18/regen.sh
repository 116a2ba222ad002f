#!/usr/bin/env bash
# Regenerates this folder: the --help text of every command and subcommand of NVIDIA's nvidia-ctk
# v1.18.2, one file per command (nvidia-ctk_cdi_generate.txt is `nvidia-ctk cdi generate --help`),
# which test/cli/nvidia_ctk_help_test.py checks gpunode-as-nvidia-ctk against.
#   test/data/nvidia-ctk-1.18/regen.sh [PATH-TO-NVIDIA-CTK]
#   test/data/nvidia-ctk-1.18/regen.sh --print-binary   # only find (or build) the binary; print its path
# Without an argument ($NVIDIA_CTK also works) the binary is taken from the peers cache
# (${GPUNODE_CACHE:-~/.cache/gpunode}/peers), or built there by test/peers/build.sh with the
# toolkit pin set to v1.18.2 (the suites' pin, test/peers/versions.env, may be newer).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
version=v1.18.2
print_only=false
if [ "${1:-}" = --print-binary ]; then print_only=true; shift; fi
ctk=${1:-${NVIDIA_CTK:-}}
peers=${GPUNODE_CACHE:-$HOME/.cache/gpunode}/peers
if [ -z "$ctk" ]; then
  for c in "$peers/nvidia-container-toolkit-$version/bin/nvidia-ctk" "$peers"/*-ctk"$version"-*/bin/nvidia-ctk; do
    if [ -x "$c" ]; then ctk=$c; break; fi
  done
fi
if [ -z "$ctk" ]; then
  # build.sh reads its pins from the versions.env beside it: a copy with the toolkit at $version.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp "$repo/test/peers/build.sh" "$tmp/"
  sed "s/^CONTAINER_TOOLKIT_VERSION=.*/CONTAINER_TOOLKIT_VERSION=$version/" "$repo/test/peers/versions.env" >"$tmp/versions.env"
  ctk=$("$tmp/build.sh" nvidia-ctk | tail -1)/nvidia-ctk
fi
if $print_only; then echo "$ctk"; exit 0; fi
"$ctk" --version | grep -q "version $version" || { echo "regen: $ctk is not nvidia-ctk $version" >&2; exit 1; }
rm -f "$here"/nvidia-ctk*.txt
walk() {  # walk WORD... : the help of `nvidia-ctk WORD...`, then of each of its commands
  local name=nvidia-ctk text
  for w in "$@"; do name+="_$w"; done
  text=$("$ctk" "$@" --help)
  printf '%s\n' "$text" >"$here/$name.txt"
  # urfave/cli's "COMMANDS:" block: "   name, alias  summary" lines (help itself left out)
  printf '%s\n' "$text" | awk '/^COMMANDS:/{f=1; next} /^[A-Z]/{f=0} f && NF {print $1}' | sed 's/,$//' |
    while read -r sub; do
      [ "$sub" = help ] || walk "$@" "$sub"
    done
}
walk
"$ctk" --version >"$here/VERSION"
echo "regen: $(ls "$here"/nvidia-ctk*.txt | wc -l) help texts of $("$ctk" --version | head -1)" >&2
