#!/usr/bin/env bash
# The exporter's status page `/` rendered by a real headless Chromium (Debian's `chromium`):
# the DOM Chromium built has one row per GPU of the simulated dgx-h200 with model, temperature
# and health, the node's driver and CUDA, and a screenshot is taken (kept as
# $SCREENSHOT_DIR/exporter-status.png when SCREENSHOT_DIR is set, e.g. for docs/).
# Usage: exporter_status_page_test.sh PATH/TO/gpunode
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
GPUNODE=${1:?usage: $0 PATH/TO/gpunode}
e2e_require_tools chromium python3
e2e_init

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$GPUNODE" --simulate dgx-h200 exporter -c 1000 --listen "127.0.0.1:$PORT" > "$E2E_TMP/exporter.log" 2>&1 &
EXP_PID=$!
e2e_on_exit kill "$EXP_PID"
for _ in $(seq 1 100); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=1)" 2>/dev/null && break
  sleep 0.1
done

chrome() {
  # No sandbox: the test runs as root in a container. A private profile dir, no first-run noise.
  timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --user-data-dir="$E2E_TMP/chrome" --window-size=1280,560 "$@" 2>>"$E2E_TMP/chrome.log"
}

e2e_step "chromium --dump-dom http://127.0.0.1:$PORT/"
DOM=$(chrome --dump-dom "http://127.0.0.1:$PORT/")
ROWS=$(printf '%s' "$DOM" | grep -o '<tr class="gpu">' | wc -l)
e2e_assert_eq "$ROWS" 8 "table rows, one per GPU"
e2e_assert_contains "$DOM" "NVIDIA H200" "model name"
e2e_assert_contains "$DOM" "GPU-8366d65c-2081-45e2-8c26-af0486894848" "GPU 7's UUID"
e2e_assert_contains "$DOM" "31 °C" "GPU 0 temperature"
e2e_assert_contains "$DOM" '<b>580.95.05</b>' "driver version"
e2e_assert_contains "$DOM" '<b>13.0</b>' "CUDA version"
e2e_assert_contains "$DOM" 'id="health">OK<' "exporter health"
HEALTHY=$(printf '%s' "$DOM" | grep -o '>healthy<' | wc -l)
e2e_assert_eq "$HEALTHY" 8 "8 GPUs healthy"

e2e_step "chromium --screenshot"
( cd "$E2E_TMP" && chrome --screenshot="$E2E_TMP/status.png" "http://127.0.0.1:$PORT/" ) >/dev/null
[ -s "$E2E_TMP/status.png" ] || e2e_fail "no screenshot: $(tail -5 "$E2E_TMP/chrome.log")"
python3 - "$E2E_TMP/status.png" <<'PY' || e2e_fail "the screenshot is not a 1280x560 PNG"
import struct, sys
d = open(sys.argv[1], "rb").read(32)
assert d[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", d[16:24])
assert (w, h) == (1280, 560), (w, h)
PY
e2e_ok "screenshot $(stat -c %s "$E2E_TMP/status.png") bytes, 1280x560"
if [ -n "${SCREENSHOT_DIR:-}" ]; then
  cp "$E2E_TMP/status.png" "$SCREENSHOT_DIR/exporter-status.png"
fi
echo "PASS: exporter_status_page"
