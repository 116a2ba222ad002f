#!/usr/bin/env python3
"""A registry token server for the tests (distribution's docs/spec/auth/token.md), over HTTPS.

GET /token?service=S&scope=repository:NAME:pull,push with HTTP basic credentials USER:PASSWORD
answers {"token": JWT, "access_token": JWT, "expires_in": 300}; wrong or missing credentials
answer 401. The JWT is RS256, signed with openssl(1) (no Python crypto module needed); its header
carries the signing certificate in x5c, which the registry checks against its `rootcertbundle`.

Usage: token_server.py PORT TLS_CERT TLS_KEY SIGN_CERT SIGN_KEY ISSUER USER:PASSWORD READY_FILE
(the ready file is written once the socket listens).
"""
import base64
import http.server
import json
import ssl
import subprocess
import sys
import time
import urllib.parse
import uuid


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main():
    port, tls_cert, tls_key, sign_cert, sign_key, issuer, userpass, ready = sys.argv[1:9]
    with open(sign_cert) as f:
        pem = f.read()
    der_b64 = "".join(l for l in pem.splitlines() if "CERTIFICATE" not in l)
    want_auth = "Basic " + base64.b64encode(userpass.encode()).decode()
    user = userpass.split(":", 1)[0]

    def sign(service, scopes):
        header = {"typ": "JWT", "alg": "RS256", "x5c": [der_b64]}
        now = int(time.time())
        access = []
        for scope in scopes:
            parts = scope.split(":")
            if len(parts) == 3 and parts[0] == "repository":
                access.append({"type": "repository", "name": parts[1], "actions": parts[2].split(",")})
        claims = {"iss": issuer, "sub": user, "aud": service, "exp": now + 300, "nbf": now - 10,
                  "iat": now, "jti": str(uuid.uuid4()), "access": access}
        signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", sign_key], input=signing_input.encode(),
                             capture_output=True, check=True).stdout
        return signing_input + "." + b64url(sig)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            sys.stderr.write("token_server: " + (fmt % args) + "\n")

        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            if url.path != "/token":
                self.send_error(404)
                return
            if self.headers.get("Authorization") != want_auth:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="token"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            q = urllib.parse.parse_qs(url.query)
            token = sign(q.get("service", [""])[0], q.get("scope", []))
            body = json.dumps({"token": token, "access_token": token, "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tls_cert, tls_key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(ready, "w") as f:
        f.write("ready\n")
    server.serve_forever()


if __name__ == "__main__":
    main()
