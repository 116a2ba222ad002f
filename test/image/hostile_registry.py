#!/usr/bin/env python3
"""A hostile "registry" for the tests, over HTTPS: answers that gpunode must refuse or cut short.

  /v2/huge/manifests/*      a 5 MiB manifest (gpunode reads at most 4 MiB)
  /v2/deep/manifests/*      JSON nested 100000 levels deep
  /v2/trickle/manifests/*   headers, then one byte every 0.2 s, forever
  /v2/tampered/manifests/*  a well-formed manifest whose bytes do not hash to the digest asked
  /v2/ratelimit/manifests/* 429 with Docker Hub's error body and Retry-After

Usage: hostile_registry.py PORT TLS_CERT TLS_KEY READY_FILE
"""
import http.server
import json
import socketserver
import ssl
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("hostile_registry: " + (fmt % args) + "\n")

    def send_body(self, status, body, ctype="application/vnd.oci.image.manifest.v1+json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = self.path.split("/")
        repo = parts[2] if len(parts) > 2 else ""
        if repo == "huge":
            self.send_body(200, b" " * (5 << 20))
        elif repo == "deep":
            self.send_body(200, b"[" * 100000 + b"]" * 100000)
        elif repo == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            self.send_header("Content-Length", str(1 << 20))
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
                return
        elif repo == "tampered":
            body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                               "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                          "digest": "sha256:" + "0" * 64, "size": 2},
                               "layers": []}).encode()
            self.send_body(200, body)
        elif repo == "ratelimit":
            body = json.dumps({"errors": [{"code": "TOOMANYREQUESTS", "message":
                               "You have reached your unauthenticated pull rate limit. "
                               "https://www.docker.com/increase-rate-limit"}]}).encode()
            self.send_body(429, body, "application/json", [("Retry-After", "60"),
                                                            ("RateLimit-Limit", "100;w=21600")])
        else:
            self.send_body(404, b'{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known"}]}',
                           "application/json")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    port, cert, key, ready = sys.argv[1:5]
    server = Server(("127.0.0.1", int(port)), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(ready, "w") as f:
        f.write("ready\n")
    server.serve_forever()


if __name__ == "__main__":
    main()
