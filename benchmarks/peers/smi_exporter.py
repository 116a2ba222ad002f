#!/usr/bin/env python3
"""The nvidia_gpu_exporter method, reduced to its core: every scrape runs
`nvidia-smi --query-gpu=... --format=csv,noheader,nounits` and turns the CSV into gauges.
Used only as a peer in benchmarks/exporter_bench.py. Usage: smi_exporter.py PORT"""
import http.server
import subprocess
import sys

FIELDS = ["index", "uuid", "name", "temperature.gpu", "temperature.memory", "power.draw",
          "utilization.gpu", "utilization.memory", "memory.used", "memory.free", "memory.reserved",
          "clocks.sm", "clocks.mem", "pcie.link.gen.current", "enforced.power.limit"]


def render():
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    lines = []
    for row in out.strip().splitlines():
        cells = [c.strip() for c in row.split(",")]
        labels = f'gpu="{cells[0]}",uuid="{cells[1]}",name="{cells[2]}"'
        for name, value in zip(FIELDS[3:], cells[3:]):
            try:
                v = float(value)
            except ValueError:
                continue
            metric = "nvidia_smi_" + name.replace(".", "_")
            lines.append(f"{metric}{{{labels}}} {v}")
    return ("\n".join(lines) + "\n").encode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/metrics":
            self.send_response(404)
            self.end_headers()
            return
        body = render()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.request_queue_size = 128
    server.serve_forever()
