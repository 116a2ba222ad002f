#!/usr/bin/env bash
# ctest e2e_image_registry: `gpunode image config` against real registries (Debian's
# docker-registry, distribution 2.8) on loopback, over TLS from a CA made here:
#   anon   no auth
#   token  token auth (test/image/token_server.py issues the JWTs, HTTPS, basic credentials)
#   basic  htpasswd (bcrypt) auth
# plus a hostile server (test/image/hostile_registry.py). The images are test/data/images/* built
# FROM scratch by test/image/make_images.sh and pushed by podman as single manifests and as
# amd64+arm64 indexes.
# Usage: e2e_registry_test.sh PATH/TO/gpunode
# Missing tools: skipped (77), except in CI (CI set), where that is a failure.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
GPUNODE=${1:?usage: $0 PATH/TO/gpunode}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

missing=()
for t in docker-registry podman openssl python3 htpasswd; do
  command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ -n "${CI:-}" ]; then
    e2e_fail "missing: ${missing[*]} (scripts/install-deps.sh installs docker-registry, apache2-utils, podman)"
  fi
  echo "SKIP: missing ${missing[*]} (scripts/install-deps.sh installs them); ctest reports it as skipped"
  exit "$E2E_SKIP"
fi
e2e_require_root  # podman's builds (vfs storage, no user namespace setup)
e2e_init
T=$E2E_TMP
# The machine's ~/.docker/config.json stays out of the test (gpunode and podman read DOCKER_CONFIG).
export DOCKER_CONFIG=$T/nodocker
mkdir -p "$DOCKER_CONFIG" && echo '{}' > "$DOCKER_CONFIG/config.json"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_file() {  # FILE WHAT
  local i
  for i in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.1; done
  e2e_fail "$2 did not start"
}
wait_port() {  # PORT WHAT LOG
  local i
  for i in $(seq 1 100); do
    if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  cat "$3" >&2 || true
  e2e_fail "$2 did not listen on $1"
}

e2e_step "test CA and certificates (127.0.0.1, localhost)"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=gpunode test CA" \
  -keyout "$T/ca.key" -out "$T/ca.pem" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$T/tls.key" -out "$T/tls.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' > "$T/ext.cnf"
openssl x509 -req -in "$T/tls.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 2 \
  -extfile "$T/ext.cnf" -out "$T/tls.pem" >/dev/null 2>&1
# The token server's signing key and certificate (the registry's rootcertbundle).
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=gpunode test token signer" \
  -keyout "$T/sign.key" -out "$T/sign.pem" >/dev/null 2>&1
mkdir -p "$T/certs.d" && cp "$T/ca.pem" "$T/certs.d/ca.crt"  # podman --cert-dir

ANON=$(free_port); TOKEN=$(free_port); BASIC=$(free_port); TOKSRV=$(free_port); HOSTILE=$(free_port)
htpasswd -Bbn basicuser basicpass > "$T/htpasswd"

registry_config() {  # NAME PORT AUTH_YAML
  mkdir -p "$T/$1/data"
  cat > "$T/$1/config.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $T/$1/data
http:
  addr: 127.0.0.1:$2
  tls:
    certificate: $T/tls.pem
    key: $T/tls.key
$3
YAML
}
registry_config anon "$ANON" ""
registry_config token "$TOKEN" "auth:
  token:
    realm: https://127.0.0.1:$TOKSRV/token
    service: gpunode-test
    issuer: gpunode-test-issuer
    rootcertbundle: $T/sign.pem"
registry_config basic "$BASIC" "auth:
  htpasswd:
    realm: gpunode-test
    path: $T/htpasswd"

e2e_step "three docker-registry instances, the token server, the hostile server"
for r in anon token basic; do
  docker-registry serve "$T/$r/config.yml" > "$T/$r.log" 2>&1 &
  e2e_on_exit kill "$!"
done
python3 "$HERE/token_server.py" "$TOKSRV" "$T/tls.pem" "$T/tls.key" "$T/sign.pem" "$T/sign.key" \
  gpunode-test-issuer tokenuser:tokenpass "$T/token.ready" > "$T/token_server.log" 2>&1 &
e2e_on_exit kill "$!"
python3 "$HERE/hostile_registry.py" "$HOSTILE" "$T/tls.pem" "$T/tls.key" "$T/hostile.ready" > "$T/hostile.log" 2>&1 &
e2e_on_exit kill "$!"
wait_port "$ANON" registry-anon "$T/anon.log"
wait_port "$TOKEN" registry-token "$T/token.log"
wait_port "$BASIC" registry-basic "$T/basic.log"
wait_file "$T/token.ready" token_server
wait_file "$T/hostile.ready" hostile_registry

e2e_step "test images (make_images.sh) pushed to each registry: singles and amd64+arm64 indexes"
"$HERE/make_images.sh" "$T/images" > "$T/make_images.log" 2>&1 || { cat "$T/make_images.log" >&2; e2e_fail "make_images.sh"; }
P=$T/images/podman.sh
declare -A CREDS=([anon]="" [token]="tokenuser:tokenpass" [basic]="basicuser:basicpass")
declare -A PORT=([anon]=$ANON [token]=$TOKEN [basic]=$BASIC)
declare -A REPO=([cuda]=nvidia/cuda [pytorch]=nvidia/pytorch [vllm-openai]=vllm/vllm-openai)
while IFS=$'\t' read -r name tag _; do
  for r in anon token basic; do
    dest=127.0.0.1:${PORT[$r]}/${REPO[$name]}
    creds=()
    [ -n "${CREDS[$r]}" ] && creds=(--creds "${CREDS[$r]}")
    for arch in amd64 arm64; do
      "$P" push -q --cert-dir "$T/certs.d" "${creds[@]}" "localhost/gpunode-test/$name:$tag-$arch" \
        "docker://$dest:$tag-$arch" > "$T/push.log" 2>&1 || { cat "$T/push.log" >&2; e2e_fail "push $dest:$tag-$arch"; }
    done
    "$P" manifest push -q --all --cert-dir "$T/certs.d" "${creds[@]}" "localhost/gpunode-test/$name:$tag" \
      "docker://$dest:$tag" > "$T/push.log" 2>&1 || { cat "$T/push.log" >&2; e2e_fail "manifest push $dest:$tag"; }
  done
done < "$T/images/images.tsv"
e2e_ok "3 images x 3 registries pushed"

# gpunode image config with the test CA; prints JSON. Extra arguments go through.
RAW() { "$GPUNODE" -o json image config --registry-ca "$T/ca.pem" "$@"; }
GP() { RAW "$@" || e2e_fail "gpunode image config $* failed (exit $?)"; }
# jq-less JSON field: env value KEY, or .field
field() {  # JSON FIELD(env:KEY|label:KEY|NAME)
  python3 -c '
import json, sys
d = json.loads(sys.argv[1]); f = sys.argv[2]
if f.startswith("env:"):
    k = f[4:] + "="
    v = [e[len(k):] for e in d["env"] if e.startswith(k)]
    print(v[-1] if v else "<unset>")
elif f.startswith("label:"):
    print(d["labels"].get(f[6:], "<unset>"))
else:
    print(d.get(f, "<unset>"))' "$1" "$2"
}
# Runs a command expected to fail with exit 2; prints its stderr.
expect_fail() {
  local rc=0 err
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -eq 2 ] || e2e_fail "expected exit 2, got $rc from: $*
$err"
  printf '%s' "$err"
}

declare -A WANT=([cuda]="CUDA_VERSION=12.8.1" [pytorch]="NVIDIA_PYTORCH_VERSION=25.08" [vllm-openai]="VLLM_USAGE_SOURCE=production-docker-image")
e2e_step "each image's config from each registry kind (index -> linux/amd64; arm64; single manifests)"
while IFS=$'\t' read -r name tag _; do
  key=${WANT[$name]%%=*}
  val=${WANT[$name]#*=}
  for r in anon token basic; do
    ref=127.0.0.1:${PORT[$r]}/${REPO[$name]}:$tag
    auth=()
    [ -n "${CREDS[$r]}" ] && auth=(--registry-auth "${CREDS[$r]}")
    out=$(GP "${auth[@]}" "$ref")
    e2e_assert_eq "$(field "$out" "env:$key")" "$val" "$r $name:$tag $key"
    e2e_assert_eq "$(field "$out" env:NVARCH)/$(field "$out" architecture)" "x86_64/amd64" "$r $name:$tag default platform"
    out=$(GP "${auth[@]}" --platform linux/arm64 "$ref")
    e2e_assert_eq "$(field "$out" env:NVARCH)/$(field "$out" architecture)" "sbsa/arm64" "$r $name:$tag --platform linux/arm64"
    out=$(GP "${auth[@]}" "$ref-arm64")
    e2e_assert_eq "$(field "$out" env:NVARCH)" "sbsa" "$r $name:$tag-arm64 (a single manifest)"
  done
done < "$T/images/images.tsv"
out=$(GP "127.0.0.1:$ANON/nvidia/cuda:12.8.1-base-ubuntu24.04")
e2e_assert_eq "$(field "$out" label:maintainer)" "NVIDIA CORPORATION <cudatools@nvidia.com>" "cuda label maintainer"
e2e_assert_contains "$(field "$out" env:NVIDIA_REQUIRE_CUDA)" "cuda>=12.8 brand=unknown,driver>=470,driver<471" "cuda NVIDIA_REQUIRE_CUDA"
e2e_assert_eq "$(field "$out" source)" "registry 127.0.0.1:$ANON" "source names the registry"
table=$("$GPUNODE" image config --registry-ca "$T/ca.pem" "127.0.0.1:$ANON/nvidia/cuda:12.8.1-base-ubuntu24.04")
e2e_assert_contains "$table" "Platform:      linux/amd64" "table: platform"
e2e_assert_contains "$table" "  CUDA_VERSION=12.8.1" "table: env"
err=$(expect_fail RAW --platform linux/s390x "127.0.0.1:$ANON/nvidia/cuda:12.8.1-base-ubuntu24.04")
e2e_assert_contains "$err" "no image for platform linux/s390x; the index has linux/amd64, linux/arm64" "a platform the index lacks is named"

e2e_step "digests: by digest works, a wrong digest is refused, a tampered manifest is refused"
digest=$(field "$out" digest)
out2=$(GP "127.0.0.1:$TOKEN/nvidia/cuda@$digest" --registry-auth tokenuser:tokenpass)
e2e_assert_eq "$(field "$out2" digest)" "$digest" "by digest ($digest)"
e2e_assert_eq "$(field "$out2" env:NVARCH)" "x86_64" "by digest: the amd64 manifest"
err=$(expect_fail RAW "127.0.0.1:$ANON/nvidia/cuda@sha256:$(printf '%064d' 7)")
e2e_assert_contains "$err" "not found (HTTP 404)" "an unknown digest: not found"
err=$(expect_fail RAW "127.0.0.1:$HOSTILE/tampered@sha256:$(printf '%064d' 1)")
e2e_assert_contains "$err" "bad digest" "a manifest that does not hash to its digest"

e2e_step "auth: wrong passwords, anonymous on private registries, the Docker config"
err=$(expect_fail RAW --registry-auth basicuser:wrong "127.0.0.1:$BASIC/nvidia/cuda:12.8.1-base-ubuntu24.04")
e2e_assert_contains "$err" "unauthorized (HTTP 401) with credentials from --registry-auth" "basic: wrong password"
err=$(expect_fail RAW --registry-auth tokenuser:wrong "127.0.0.1:$TOKEN/nvidia/cuda:12.8.1-base-ubuntu24.04")
e2e_assert_contains "$err" "refused the credentials from --registry-auth" "token: wrong password"
err=$(expect_fail RAW "127.0.0.1:$TOKEN/nvidia/cuda:12.8.1-base-ubuntu24.04")
e2e_assert_contains "$err" "anonymous" "token: anonymous is unauthorized and says so"
mkdir -p "$T/docker"
printf '{"auths":{"127.0.0.1:%s":{"auth":"%s"}}}\n' "$BASIC" "$(printf basicuser:basicpass | base64)" > "$T/docker/config.json"
out=$(DOCKER_CONFIG=$T/docker GP "127.0.0.1:$BASIC/nvidia/pytorch:25.08-py3")
e2e_assert_eq "$(field "$out" env:NVIDIA_PYTORCH_VERSION)" "25.08" "basic: credentials from \$DOCKER_CONFIG/config.json"
printf '{"credHelpers":{"127.0.0.1:%s":"secretservice"}}\n' "$BASIC" > "$T/docker/config.json"
err=$(DOCKER_CONFIG=$T/docker expect_fail RAW "127.0.0.1:$BASIC/nvidia/pytorch:25.08-py3")
e2e_assert_contains "$err" "not supported" "a credential helper is named as not supported"
printf 'basicuser:basicpass\n' > "$T/auth.txt"
out=$(GP --registry-auth-file "$T/auth.txt" "127.0.0.1:$BASIC/vllm/vllm-openai:v0.10.1")
e2e_assert_eq "$(field "$out" env:CUDA_VERSION)" "12.8.1" "--registry-auth-file"

e2e_step "TLS: an untrusted CA is refused; \$SSL_CERT_FILE works as the CA"
err=$(expect_fail "$GPUNODE" image config "127.0.0.1:$ANON/nvidia/cuda:12.8.1-base-ubuntu24.04")
e2e_assert_contains "$err" "certificate is not trusted" "no CA given: the test CA is not trusted"
out=$(SSL_CERT_FILE=$T/ca.pem "$GPUNODE" -o json image config "127.0.0.1:$ANON/nvidia/cuda:12.8.1-base-ubuntu24.04")
e2e_assert_eq "$(field "$out" env:CUDA_VERSION)" "12.8.1" "SSL_CERT_FILE"

e2e_step "errors: 404, no network, rate limit, huge, deep, trickle"
err=$(expect_fail RAW "127.0.0.1:$ANON/nvidia/cuda:no-such-tag")
e2e_assert_contains "$err" "registry 127.0.0.1:$ANON, repository nvidia/cuda: manifest no-such-tag: not found (HTTP 404)" "unknown tag"
err=$(expect_fail RAW "127.0.0.1:$ANON/no/such-repo:1")
e2e_assert_contains "$err" "not found" "unknown repository"
CLOSED=$(free_port)
err=$(expect_fail RAW "127.0.0.1:$CLOSED/x:1")
e2e_assert_contains "$err" "no network: cannot connect to 127.0.0.1:$CLOSED" "closed port"
err=$(expect_fail RAW "registry.gpunode-test.invalid/x:1")
e2e_assert_contains "$err" "no network" "unresolvable name"
err=$(expect_fail RAW "127.0.0.1:$HOSTILE/ratelimit:1")
e2e_assert_contains "$err" "rate-limited (HTTP 429): You have reached your unauthenticated pull rate limit" "429 message"
e2e_assert_contains "$err" "retry after 60 s" "429 Retry-After"
err=$(expect_fail RAW "127.0.0.1:$HOSTILE/huge:1")
e2e_assert_contains "$err" "larger than the 4194304 bytes" "a 5 MiB manifest"
err=$(expect_fail RAW "127.0.0.1:$HOSTILE/deep:1")
e2e_assert_contains "$err" "nested deeper than" "deep JSON"
start=$(date +%s.%N)
err=$(expect_fail RAW --timeout 3 "127.0.0.1:$HOSTILE/trickle:1")
took=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$start" "$(date +%s.%N)")
e2e_assert_contains "$err" "no complete answer within the lookup's 3 s" "trickle: the deadline"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 5 else 1)" "$took" || e2e_fail "trickle took ${took}s (deadline 3 s)"
e2e_ok "trickle ended after ${took}s"

e2e_step "compat check --image answers from the registry for an image the data set does not know"
CC() { "$GPUNODE" -o json compat check --registry-ca "$T/ca.pem" "$@"; }
verdict() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); w=d["workload"]; print(d["verdict"], d["rule"]["id"], w["cuda"], w["imageConfig"]["source"])'; }
vref=127.0.0.1:$ANON/vllm/vllm-openai:v0.10.1
out=$(CC --image-source data --image "$vref" --driver 580.65.06 --gpu H100 || true)
e2e_assert_contains "$(printf '%s' "$out" | verdict)" "unknown" "data set alone: unknown ($vref)"
out=$(CC --image "$vref" --driver 580.65.06 --gpu H100 || true)
got=$(printf '%s' "$out" | verdict)
e2e_assert_eq "$got" "compatible paired-driver 12.8.1 registry 127.0.0.1:$ANON" "R580 runs it (CUDA_VERSION from the registry)"
out=$(CC --image "$vref" --driver 545.29.06 --gpu H100 || true)
got=$(printf '%s' "$out" | verdict)
e2e_assert_contains "$got" "incompatible image-requires 12.8.1 registry 127.0.0.1:$ANON" "R545 fails NVIDIA_REQUIRE_CUDA (no driver group of 545)"
table=$("$GPUNODE" compat check --registry-ca "$T/ca.pem" --image "$vref" --driver 545.29.06 --gpu H100 || true)
e2e_assert_contains "$table" "answered by: registry 127.0.0.1:$ANON" "the text names the source"
table=$("$GPUNODE" compat check --registry-ca "$T/ca.pem" --image "127.0.0.1:$CLOSED/vllm/vllm-openai:v0.10.1" --driver 580.65.06 --gpu H100 || true)
e2e_assert_contains "$table" "answered by: the data set (the image's config was not found:" "no registry: the data set answers and says why"

echo "PASS: e2e_image_registry"
