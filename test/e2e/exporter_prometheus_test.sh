#!/usr/bin/env bash
# A real Prometheus server (Debian's `prometheus` package) scrapes `gpunode exporter` on a
# simulated dgx-h200 every second over loopback; the test reads what Prometheus stored through its
# HTTP API: the series and labels dcgm-exporter's dashboards use, a value from the profile, and,
# after the profile loses GPU 3, health 0 for that GPU while the other seven keep reporting.
# Usage: exporter_prometheus_test.sh PATH/TO/gpunode
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
GPUNODE=${1:?usage: $0 PATH/TO/gpunode}
e2e_require_tools prometheus python3
e2e_init

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
EXP_PORT=$(free_port)
PROM_PORT=$(free_port)

e2e_step "simulated dgx-h200 with GPU 2 using 40960 MiB"
cp "$E2E_SOURCE_DIR/data/profiles/dgx-h200.yaml" "$E2E_TMP/profile.yaml"
python3 - "$E2E_TMP/profile.yaml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace("minor: 2,", "minor: 2, memory: {total_mib: 143771, used_mib: 40960, reserved_mib: 568},", 1)
open(p, "w").write(s)
PY

e2e_step "gpunode exporter on 127.0.0.1:$EXP_PORT, 1 s interval"
GPUNODE_SIM_RELOAD_MS=0 "$GPUNODE" --simulate "$E2E_TMP/profile.yaml" exporter -c 1000 \
  --listen "127.0.0.1:$EXP_PORT" > "$E2E_TMP/exporter.log" 2>&1 &
EXP_PID=$!
e2e_on_exit kill "$EXP_PID"

cat > "$E2E_TMP/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gpunode
    static_configs:
      - targets: ["127.0.0.1:$EXP_PORT"]
YAML
e2e_step "prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') on 127.0.0.1:$PROM_PORT"
prometheus --config.file="$E2E_TMP/prometheus.yml" --storage.tsdb.path="$E2E_TMP/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" > "$E2E_TMP/prometheus.log" 2>&1 &
PROM_PID=$!
e2e_on_exit kill "$PROM_PID"

# query EXPR -> the JSON "result" array of an instant query, compact.
query() {
  python3 - "$PROM_PORT" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
port, expr = sys.argv[1], sys.argv[2]
url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
try:
    doc = json.load(urllib.request.urlopen(url, timeout=5))
except Exception as e:
    print(f"ERROR {e}")
    sys.exit(0)
print(json.dumps(doc["data"]["result"], sort_keys=True))
PY
}
# value EXPR -> the value of a single-sample result, or "none"
value() {
  query "$1" | python3 -c 'import json,sys
t=sys.stdin.read().strip()
r=json.loads(t) if t.startswith("[") else []
print(r[0]["value"][1] if len(r)==1 else "none")'
}
# wait_for EXPR WANT WHAT: polls for up to 30 s until value(EXPR) == WANT
wait_for() {
  local got=""
  for _ in $(seq 1 150); do
    got=$(value "$1")
    [ "$got" = "$2" ] && { e2e_ok "$3"; return 0; }
    sleep 0.2
  done
  echo "--- exporter log"; cat "$E2E_TMP/exporter.log"; echo "--- prometheus log"; tail -20 "$E2E_TMP/prometheus.log"
  e2e_fail "$3: $1 = '$got', want '$2'"
}

wait_for 'up{job="gpunode"}' 1 "Prometheus scrapes the exporter (up == 1)"
wait_for 'count(DCGM_FI_DEV_GPU_TEMP)' 8 "8 GPUs report DCGM_FI_DEV_GPU_TEMP"
wait_for 'DCGM_FI_DEV_FB_USED{gpu="2"}' 40960 "GPU 2 memory used = the profile's 40960 MiB"
wait_for 'DCGM_FI_DEV_FB_USED{gpu="1"}' 0 "GPU 1 memory used = 0 MiB"
wait_for 'count(DCGM_FI_DEV_SM_CLOCK{modelName="NVIDIA H200",Hostname="dgx-h200-01",DCGM_FI_DRIVER_VERSION="580.95.05"})' 8 \
  "dcgm-exporter labels: modelName, Hostname, DCGM_FI_DRIVER_VERSION"
wait_for 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-0b566429-adc1-458a-9244-af5a49e0505e",device="nvidia0",pci_bus_id="00000000:18:00.0"}' 31 \
  "GPU 0 identity labels and temperature 31 C"
wait_for 'DCGM_FI_DEV_POWER_USAGE{gpu="5"}' 74.5 "power is a double in W (74.5)"
wait_for 'count(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION)' 8 "energy counter (slow sampler) for 8 GPUs"
wait_for 'sum(gpunode_gpu_health)' 8 "gpunode_gpu_health is 1 on 8 GPUs"
wait_for 'gpunode_build_info > 0' 1 "gpunode_build_info"

e2e_step "the profile loses GPU 3 (falls off the bus)"
python3 - "$E2E_TMP/profile.yaml" <<'PY'
import os, sys
p = sys.argv[1]
s = open(p).read().replace("minor: 3,", "minor: 3, lost: true,", 1)
open(p + ".tmp", "w").write(s)
os.replace(p + ".tmp", p)
PY
wait_for 'gpunode_gpu_health{gpu="3"}' 0 "GPU 3 health goes to 0"
wait_for 'count(DCGM_FI_DEV_GPU_TEMP)' 7 "the other 7 GPUs keep reporting (GPU 3's series go stale)"
wait_for 'count(DCGM_FI_DEV_GPU_TEMP{gpu="3"})' none "no temperature for GPU 3"
wait_for 'DCGM_FI_DEV_FB_USED{gpu="2"}' 40960 "GPU 2 still reads 40960 MiB"
wait_for 'count(gpunode_collection_errors_total{field="gpu"} > 0)' 1 "collection errors counted for the lost GPU"
wait_for 'up{job="gpunode"}' 1 "the exporter is still up"
grep -q "GPU 3 (GPU-ba8397f6-35c6-4721-9454-6cc61818e68c) cannot be read" "$E2E_TMP/exporter.log" ||
  e2e_fail "no log line for the lost GPU: $(cat "$E2E_TMP/exporter.log")"
e2e_ok "one log line names the lost GPU"
echo "PASS: exporter_prometheus"
