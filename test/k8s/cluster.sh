#!/usr/bin/env bash
# A real one-node Kubernetes cluster for gpunode's tests, run as plain root processes (no systemd, no
# registry, no kubeadm): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd 2
# (CDI on, runc, CNI from /usr/lib/cni), kubelet and kube-proxy (iptables), built by test/k8s/build.sh
# from the versions pinned in test/k8s/versions.env.
#
#   test/k8s/cluster.sh up       start it; prints `export KUBECONFIG=...` on stdout, waits for Node Ready
#   test/k8s/cluster.sh down     stop it and undo everything `up` did to the host (idempotent)
#   test/k8s/cluster.sh status   what runs, and the Node's Ready condition
#   test/k8s/cluster.sh restart-kubelet   stop and start the kubelet again (pods keep running)
#   test/k8s/cluster.sh restart-containerd  the same for containerd (after its config was edited)
#
# Everything lives in a state dir (GPUNODE_K8S_STATE, default /tmp/gpunode-k8s): certificates, configs,
# logs (logs/<component>.log), PID files (run/<component>.pid), etcd data, containerd root/state, the
# kubelet root dir, CNI IPAM state. Outside it, only what the kubelet hard-codes: the device-plugin
# socket dir /var/lib/kubelet/device-plugins/ (kubelet.sock), plus a link /var/lib/kubelet/pod-resources
# -> <state>/kubelet/pod-resources so pod-resources clients find the socket at its usual path; and
# /var/log/containers/ (log links), /var/lib/cni/results/ (libcni cache), /run/containerd/s/ (shim
# sockets). `down` removes what it made there.
# Network: the apiserver is https://127.0.0.1:6443 for the host; the node's address is the CNI
# gateway 10.244.0.1 on the cni0 bridge (made by `up`), services are 10.96.0.0/12, pods 10.244.0.0/24.
# Ports 6443 and 10250 are dropped unless they come from loopback or the pod network.
# The aggregation layer is on (a front-proxy CA, --enable-aggregator-routing): an extension API server
# run on the host (e.g. prometheus-adapter, test/k8s/e2e_monitoring.sh) is registered as an APIService
# whose Service has an Endpoints address of the node (10.244.0.1).
#
# Images (no registry): a pause image (registry.k8s.io/pause:3.10.1, containerd's sandbox image) and
# gpunode.test/busybox:1 are built from busybox-static with podman and imported with ctr.
#
# Host adaptations (each logged when it applies): cgroup v1 hosts get `failCgroupV1: false` (the
# kubelet refuses cgroup v1 by default since 1.35); hosts whose processes lack CAP_SYS_RESOURCE get
# containerd's `restrict_oom_score_adj` (else runc cannot set the pods' negative oom_score_adj);
# without br_netfilter, pod->Service traffic on the bridge is not NATed (warned).
# Measured (2-core Debian 12 VM, cgroup v1, load ~4 from other builds): warm `up` to Node Ready 4-7 s,
# `down` 3-4 s; the first `up` (certificates, podman images) ~10 s; build.sh from scratch ~16 min.
# Limits: no cluster DNS (pods get an empty resolv.conf; use Service IPs or env vars); NodePorts answer
# on 10.244.0.1 only; busybox's wget cannot do TLS with the apiserver (use a real client).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
S=$(realpath -m "${GPUNODE_K8S_STATE:-/tmp/gpunode-k8s}")
# containerd's socket and its .ttrpc twin are unix sockets: 108 bytes at most
[ ${#S} -le 70 ] || { echo "k8s cluster: GPUNODE_K8S_STATE is too long (unix socket paths): $S" >&2; exit 2; }
NODE=${GPUNODE_K8S_NODE:-$(hostname | tr 'A-Z' 'a-z')}
READY_TIMEOUT=${GPUNODE_K8S_READY_TIMEOUT:-120}
VERBOSITY=${GPUNODE_K8S_V:-0}
SHARED_ROOT=${GPUNODE_K8S_SHARED_ROOT:-1}
KCM_QPS=${GPUNODE_K8S_KCM_QPS:-}
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SVC_CIDR=10.96.0.0/12
SVC_IP=10.96.0.1
BRIDGE=cni0
CNI_NET=gpunode-k8s
CNI_BIN=${GPUNODE_K8S_CNI_BIN:-/usr/lib/cni}
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
SANDBOX_IDS=()
TEST_IMAGE=gpunode.test/busybox:1
# start order; `down` stops them in the reverse of this
COMPONENTS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
PORTS=(2379 2380 6443 10248 10249 10250 10256 10257 10259)
SYSCTLS=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
  kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet)

usage() {
  cat <<EOF
usage: test/k8s/cluster.sh up|down [--purge]|status|restart-kubelet|restart-containerd|restart-apiserver|--help

  up       build what is missing (test/k8s/build.sh), start a one-node cluster as root processes,
           print 'export KUBECONFIG=$S/admin.kubeconfig' on stdout and wait (at most
           \$GPUNODE_K8S_READY_TIMEOUT=$READY_TIMEOUT s) for the Node to be Ready. On failure: the tail of the
           failing component's log, everything stopped again, exit 1.
  down     stop every process it started (pods included), unmount everything under the state dir, delete
           cni0 and its veths, remove the iptables rules/chains of kube-proxy, the kubelet, our CNI
           network and our guard, restore the sysctls and mount propagation it changed. Idempotent.
           Keeps <state>/pki, images and logs; --purge deletes the whole state dir.
  status   components (pid, running or not) and the Node's Ready condition.
  restart-kubelet  stop the kubelet and start it again (pods keep running), as a node upgrade does.
  restart-containerd  stop containerd and start it again with its config (after gpunode runtime
                   configure edited <state>/containerd/config.toml); containers keep running.
  restart-apiserver  stop the API server and start it again (watches and connections break).

environment:
  GPUNODE_K8S_STATE          state dir (default /tmp/gpunode-k8s)
  GPUNODE_K8S_NODE           node name (default: the host name)
  GPUNODE_K8S_READY_TIMEOUT  seconds to wait for Node Ready (default 120)
  GPUNODE_K8S_V              log verbosity of the Kubernetes components (default 0)
  GPUNODE_K8S_KEEP=1         after a failed up, leave what started running (for debugging)
  GPUNODE_K8S_SHARED_ROOT=0  leave / private (pods then cannot use HostToContainer/Bidirectional
                             mount propagation on host paths)
  GPUNODE_K8S_KCM_QPS=N      the controller manager's API rate (--kube-api-qps N, burst 2N; default
                             its own 20): test/k8s/kwok.sh's 1000 fake nodes need ~200 (else a
                             DaemonSet of 250 pods takes ~100 s instead of ~20 s)
  GPUNODE_CACHE              build cache of test/k8s/build.sh (default ~/.cache/gpunode)
EOF
}

log() { echo "k8s cluster: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------- processes

pidfile() { echo "$S/run/$1.pid"; }
# The PID of a component if it runs (its PID file names a live process running that binary).
pid_of() {
  local f pid exe
  f=$(pidfile "$1")
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  [ -d "/proc/$pid" ] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "$(basename "${exe% (deleted)}")" = "$1" ] || return 1
  echo "$pid"
}

start_apiserver() {
  start kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=0.0.0.0 --advertise-address="$NODE_IP" --secure-port=6443 \
    --tls-cert-file="$S/pki/apiserver.crt" --tls-private-key-file="$S/pki/apiserver.key" \
    --client-ca-file="$S/pki/ca.crt" \
    --kubelet-client-certificate="$S/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$S/pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --service-cluster-ip-range="$SVC_CIDR" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$S/pki/sa.pub" --service-account-signing-key-file="$S/pki/sa.key" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --requestheader-client-ca-file="$S/pki/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$S/pki/front-proxy-client.crt" --proxy-client-key-file="$S/pki/front-proxy-client.key" \
    --enable-aggregator-routing=true \
    --allow-privileged=true --profiling=false --v="$VERBOSITY"
}

start_kubelet() {
  start kubelet "$BIN/kubelet" --config="$S/kubelet/config.yaml" --kubeconfig="$S/kubelet.kubeconfig" \
    --root-dir="$S/kubelet" --cert-dir="$S/kubelet/pki" --node-ip="$NODE_IP" --hostname-override="$NODE" --v="$VERBOSITY"
}

# restart-kubelet: stop the kubelet (SIGTERM) and start it again with the same configuration, as a
# node upgrade or `systemctl restart kubelet` does; running pods stay.
do_restart_kubelet() {
  pid_of kube-apiserver >/dev/null || die "the cluster is not up"
  find_bins
  stop kubelet
  start_kubelet
  log "kubelet restarted (pid $(pid_of kubelet || echo '?'))"
}

# restart-apiserver: stop the API server and start it again (clients see their connections and
# watches break, as in a control-plane upgrade); waits until it is ready.
do_restart_apiserver() {
  pid_of kube-apiserver >/dev/null || die "the cluster is not up"
  find_bins
  stop kube-apiserver 3  # it drains watches for longer than that; clients must cope with the cut
  start_apiserver
  wait_for kube-apiserver 60 admin_curl https://127.0.0.1:6443/readyz
  log "kube-apiserver restarted (pid $(pid_of kube-apiserver || echo '?'))"
}

# restart-containerd: stop containerd and start it with its (possibly edited) config, as a node's
# `systemctl restart containerd` after `gpunode runtime configure`; running containers stay (their
# shims keep them).
do_restart_containerd() {
  pid_of kube-apiserver >/dev/null || die "the cluster is not up"
  find_bins
  stop containerd
  start containerd "$BIN/containerd" --config "$S/containerd/config.toml"
  wait_for containerd 30 "$BIN/ctr" --address "$S/containerd/containerd.sock" version
  log "containerd restarted (pid $(pid_of containerd || echo '?'))"
}

start() { # start NAME CMD... : a background root process in its own session, log and PID file
  local name=$1; shift
  mkdir -p "$S/logs" "$S/run"
  echo "=== $(date -u +%FT%TZ) $*" >> "$S/logs/$name.log"
  setsid "$@" >> "$S/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile "$name")"
}

# alive PID: the process exists and is not a zombie (ours are reaped by PID 1, sometimes seconds later)
alive() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] || return 1
  [ "$st" != Z ] && [ "$st" != X ]
}

stop() { # stop NAME [GRACE_SECONDS]
  local name=$1 grace=${2:-10} pid i
  if pid=$(pid_of "$name"); then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
      log "$name (pid $pid) ignored SIGTERM for ${grace}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
    fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$(pidfile "$name")"
}

fail() { # fail COMPONENT MESSAGE: show its log's tail, stop everything, exit 1
  local name=$1; shift
  log "ERROR: $*"
  if [ -f "$S/logs/$name.log" ]; then
    echo "----- last lines of $S/logs/$name.log -----" >&2
    tail -n 25 "$S/logs/$name.log" >&2
    echo "-----" >&2
  fi
  if [ "${GPUNODE_K8S_KEEP:-0}" != 1 ]; then
    log "stopping what was started (GPUNODE_K8S_KEEP=1 keeps it for debugging)"
    do_down >&2 || true
  fi
  exit 1
}

# wait_for NAME TIMEOUT CMD...: until CMD succeeds; fails (with NAME's log) if NAME dies or time runs out
wait_for() {
  local name=$1 timeout=$2; shift 2
  local t0=$SECONDS
  until "$@" >/dev/null 2>&1; do
    pid_of "$name" >/dev/null || fail "$name" "$name exited while starting"
    ((SECONDS - t0 < timeout)) || fail "$name" "$name not ready after ${timeout}s"
    sleep 0.2
  done
}

# ---------------------------------------------------------------- binaries, images, certificates

# the bin folder build.sh fills (same key), without building anything
cached_bin() {
  (
    . "$here/versions.env"
    echo "${GPUNODE_CACHE:-${HOME:-/root}/.cache/gpunode}/k8s/$K8S_VERSION-etcd$ETCD_VERSION-containerd$CONTAINERD_VERSION-helm$HELM_VERSION/bin"
  )
}

find_bins() {
  local out
  log "checking the binaries (test/k8s/build.sh; builds only what is missing)"
  out=$(nice -n 10 bash "$here/build.sh") || die "test/k8s/build.sh failed"
  BIN=$(printf '%s\n' "$out" | tail -n 1)
  local b
  for b in etcd containerd containerd-shim-runc-v2 ctr kube-apiserver kube-controller-manager kube-scheduler \
    kubelet kube-proxy kubectl; do
    [ -x "$BIN/$b" ] || die "$BIN/$b missing after build.sh"
  done
}

need_cmds() {
  local c missing=()
  for c in openssl runc podman iptables iptables-save iptables-restore ip curl mount umount setsid; do
    command -v "$c" >/dev/null || missing+=("$c")
  done
  [ -x /bin/busybox ] || missing+=("busybox-static")
  local p
  for p in bridge host-local portmap loopback; do [ -x "$CNI_BIN/$p" ] || missing+=("$CNI_BIN/$p"); done
  [ ${#missing[@]} -eq 0 ] || die "missing: ${missing[*]} (bash scripts/install-deps.sh installs them)"
}

# gen_cert NAME CN O EXTKEYUSAGE [SAN]: a key and a certificate signed by our CA
gen_cert() {
  local name=$1 cn=$2 o=$3 eku=$4 san=${5:-} subj
  subj="/CN=$cn"; [ -n "$o" ] && subj="/O=$o$subj"
  {
    echo "[v3]"
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } > "$S/pki/$name.ext"
  # EC P-256 keys, RSA for the apiserver's serving certificate (the widest client support; busybox's
  # own TLS, used by wget inside gpunode.test/busybox:1, still cannot talk to the apiserver)
  local key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) ca=${GEN_CERT_CA:-ca}
  [ "$name" = apiserver ] && key=(-newkey rsa:2048)
  openssl req -new -nodes "${key[@]}" -keyout "$S/pki/$name.key" \
    -out "$S/pki/$name.csr" -subj "$subj" 2>/dev/null
  openssl x509 -req -in "$S/pki/$name.csr" -CA "$S/pki/$ca.crt" -CAkey "$S/pki/$ca.key" -CAcreateserial \
    -days 3650 -extfile "$S/pki/$name.ext" -extensions v3 -out "$S/pki/$name.crt" 2>/dev/null
  rm -f "$S/pki/$name.csr" "$S/pki/$name.ext"
}

make_pki() {
  local sans="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  sans+=",DNS:kubernetes.default.svc.cluster.local,DNS:localhost,DNS:$NODE,IP:127.0.0.1,IP:$SVC_IP,IP:$NODE_IP"
  if [ -s "$S/pki/front-proxy-client.crt" ] && [ "$(cat "$S/pki/node" 2>/dev/null)" = "$NODE" ]; then return 0; fi
  log "making certificates (openssl) in $S/pki"
  rm -rf "$S/pki"; mkdir -p "$S/pki"; chmod 700 "$S/pki"
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout "$S/pki/ca.key" \
    -out "$S/pki/ca.crt" -days 3650 -subj "/CN=gpunode-k8s-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  gen_cert apiserver kube-apiserver "" serverAuth "$sans"
  gen_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth
  gen_cert admin admin system:masters clientAuth
  gen_cert kubelet "system:node:$NODE" system:nodes clientAuth
  gen_cert controller-manager system:kube-controller-manager "" clientAuth
  gen_cert scheduler system:kube-scheduler "" clientAuth
  gen_cert kube-proxy system:kube-proxy "" clientAuth
  # The aggregation layer (APIServices such as prometheus-adapter's custom.metrics.k8s.io): a CA of
  # its own for the front proxy, as kubeadm makes, and the client certificate the API server
  # presents to extension API servers.
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout "$S/pki/front-proxy-ca.key" \
    -out "$S/pki/front-proxy-ca.crt" -days 3650 -subj "/CN=gpunode-k8s-front-proxy-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  GEN_CERT_CA=front-proxy-ca gen_cert front-proxy-client front-proxy-client "" clientAuth
  openssl genrsa -out "$S/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$S/pki/sa.key" -pubout -out "$S/pki/sa.pub" 2>/dev/null
  echo "$NODE" > "$S/pki/node"
}

kubeconfig() { # kubeconfig NAME CERT: <state>/NAME.kubeconfig for https://127.0.0.1:6443
  cat > "$S/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpunode-k8s
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: $(base64 -w0 < "$S/pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 < "$S/pki/$2.crt")
    client-key-data: $(base64 -w0 < "$S/pki/$2.key")
contexts:
- name: gpunode-k8s
  context: {cluster: gpunode-k8s, user: $2}
current-context: gpunode-k8s
EOF
  chmod 600 "$S/$1.kubeconfig"
}

# Two images from busybox-static, built FROM scratch with podman and saved as OCI archives
# (<state>/images/*.tar, kept by `down`; only rebuilt when missing).
build_images() {
  local d=$S/images
  [ -s "$d/pause.tar" ] && [ -s "$d/busybox.tar" ] && return 0
  log "building $PAUSE_IMAGE and $TEST_IMAGE from /bin/busybox with podman"
  rm -rf "$d"; mkdir -p "$d/rootfs/bin" "$d/rootfs/etc" "$d/rootfs/tmp" "$d/rootfs/root"
  cp /bin/busybox "$d/rootfs/bin/busybox"
  local a
  for a in $(/bin/busybox --list); do
    [ "$a" = busybox ] || ln -sf busybox "$d/rootfs/bin/$a"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$d/rootfs/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' > "$d/rootfs/etc/group"
  chmod 1777 "$d/rootfs/tmp"
  tar -C "$d/rootfs" -cf "$d/rootfs.tar" .
  # pause: PID 1 of every pod sandbox; exits on TERM/INT, reaps children while waiting
  cat > "$d/Containerfile.pause" <<'EOF'
FROM scratch
ADD rootfs.tar /
ENTRYPOINT ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait; done"]
EOF
  cat > "$d/Containerfile.busybox" <<'EOF'
FROM scratch
ADD rootfs.tar /
ENV PATH=/bin
CMD ["/bin/sh"]
EOF
  local img file
  for img in pause busybox; do
    [ "$img" = pause ] && a=$PAUSE_IMAGE || a=$TEST_IMAGE
    file=$d/$img.tar
    nice -n 10 podman build -q --network none -f "$d/Containerfile.$img" -t "$a" "$d" >> "$S/logs/images.log" 2>&1 ||
      { log "podman build of $a failed"; return 1; }
    podman save -q --format oci-archive -o "$file.tmp" "$a" >> "$S/logs/images.log" 2>&1 ||
      { log "podman save of $a failed"; return 1; }
    podman rmi -f "$a" >> "$S/logs/images.log" 2>&1 || true
    mv "$file.tmp" "$file"
  done
  rm -rf "$d/rootfs"
}

ctr_() { "$BIN/ctr" --address "$S/containerd/containerd.sock" -n k8s.io "$@"; }

import_images() {
  local img ref have
  for img in pause:$PAUSE_IMAGE busybox:$TEST_IMAGE; do
    ref=${img#*:}
    ctr_ images import --snapshotter overlayfs "$S/images/${img%%:*}.tar" >> "$S/logs/images.log" 2>&1 ||
      fail images "ctr images import of $ref failed"
    have=$(ctr_ images ls -q 2>> "$S/logs/images.log")
    grep -qx "$ref" <<< "$have" || fail images "$ref not in containerd after import (ctr images ls: $(tr '\n' ' ' <<< "$have"))"
  done
  # what the kubelet's image GC must never delete
  ctr_ images label "$PAUSE_IMAGE" io.cri-containerd.pinned=pinned >/dev/null 2>> "$S/logs/images.log"
}

# ---------------------------------------------------------------- configuration files

write_configs() {
  mkdir -p "$S/containerd" "$S/kubelet" "$S/cni/net.d" "$S/cni/networks" "$S/etcd"
  cat > "$S/containerd/config.toml" <<EOF
version = 3
root = '$S/containerd/root'
state = '$S/containerd/state'
imports = []
disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.zfs', 'io.containerd.snapshotter.v1.blockfile', 'io.containerd.snapshotter.v1.btrfs']

[grpc]
  address = '$S/containerd/containerd.sock'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '$PAUSE_IMAGE'

  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = $RESTRICT_OOM
    enable_cdi = true
    cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '$(command -v runc)'
          Root = '$S/containerd/runc'
          SystemdCgroup = $([ "$CGROUP_DRIVER" = systemd ] && echo true || echo false)
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['$CNI_BIN']
      conf_dir = '$S/cni/net.d'
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.internal.v1.opt']
    path = '$S/containerd/opt'
EOF

  cat > "$S/cni/net.d/10-$CNI_NET.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$S/cni/networks"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
EOF

  kubeconfig admin admin
  kubeconfig kubelet kubelet
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  kubeconfig kube-proxy kube-proxy

  # pods get no name server (no cluster DNS here, and the host's resolver is outside the cluster)
  echo "# gpunode test cluster: no DNS (confined to loopback and the cluster's addresses)" > "$S/resolv.conf"
  cat > "$S/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $S/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$S/containerd/containerd.sock
cgroupDriver: $CGROUP_DRIVER
cgroupRoot: /kubelet
failCgroupV1: false
failSwapOn: false
imageGCHighThresholdPercent: 100
evictionHard:
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
resolvConf: $S/resolv.conf
podCIDR: $POD_CIDR
serializeImagePulls: false
podLogsDir: $S/pod-logs
# The kubelet posts a device plugin's capacity changes (a GPU gone unhealthy) to the Node on this
# tick (default 10 s): 1 s lets the tests time gpunode's own reaction, not the kubelet's timer.
nodeStatusUpdateFrequency: 1s
EOF
  [ "$RESTRICT_OOM" = false ] || echo "oomScoreAdj: 0" >> "$S/kubelet/config.yaml"

  cat > "$S/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $S/kube-proxy.kubeconfig
hostnameOverride: $NODE
mode: iptables
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$POD_CIDR"]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  minSyncPeriod: 1s
EOF
  [ "$RESTRICT_OOM" = false ] || echo "oomScoreAdj: 0" >> "$S/kube-proxy.yaml"
}

# ---------------------------------------------------------------- host preparation and its undo

save_host_state() {
  local k v
  [ -f "$S/host/sysctl" ] || {
    mkdir -p "$S/host"
    for k in "${SYSCTLS[@]}"; do
      v=$(sysctl -n "$k" 2>/dev/null) && printf '%s=%s\n' "$k" "$v"
    done > "$S/host/sysctl.tmp"
    mv "$S/host/sysctl.tmp" "$S/host/sysctl"
  }
  [ -f "$S/host/root-propagation" ] || findmnt -n -o PROPAGATION / > "$S/host/root-propagation"
  local save
  for save in iptables-save ip6tables-save; do
    [ -f "$S/host/$save-hostport" ] || { [[ "$("$save" -t nat 2>/dev/null)" == *":CNI-HOSTPORT-"* ]] && echo existed || echo absent; } > "$S/host/$save-hostport"
  done
  # places outside the state dir that containerd, the kubelet and libcni write to whatever they are told
  local d f
  for d in /run/containerd /var/log/containers /var/lib/cni /var/lib/kubelet; do
    f=$S/host/existed$(tr / - <<< "$d")
    [ -f "$f" ] || { [ -e "$d" ] && echo existed || echo absent; } > "$f"
  done
}

prep_host() {
  save_host_state
  sysctl -qw net.ipv4.ip_forward=1
  if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || modprobe br_netfilter 2>/dev/null; then
    sysctl -qw net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1 ||
      log "WARNING: could not set bridge-nf-call-iptables: Services reached from a pod on the same bridge may not work"
  else
    log "WARNING: br_netfilter is not available here (no /proc/sys/net/bridge, modprobe failed): pod->Service traffic that stays on the bridge is not NATed"
  fi
  # HostToContainer/Bidirectional mount propagation of host paths needs their mount shared. kind makes
  # / rshared; here only / itself (not /dev, /sys, ... under it) is made shared, which `down` can undo
  # exactly. (The kubelet makes its own root dir an rshared bind mount.)
  if [ "$SHARED_ROOT" = 1 ] && [ "$(findmnt -n -o PROPAGATION /)" != shared ]; then
    mount --make-shared /
    log "made / a shared mount (down makes it $(cat "$S/host/root-propagation") again)"
  fi
  # The device-plugin socket dir is always /var/lib/kubelet/device-plugins; the pod-resources socket
  # follows --root-dir: link it to where its clients (dcgm-exporter, gpunode exporter) look by default
  mkdir -p /var/lib/kubelet
  [ -e /var/lib/kubelet/pod-resources ] || [ -L /var/lib/kubelet/pod-resources ] ||
    ln -s "$S/kubelet/pod-resources" /var/lib/kubelet/pod-resources
  # cgroup v1: the kubelet's --cgroup-root must exist in every hierarchy
  if [ "$CGROUP_V" = 1 ]; then
    local h
    for h in /sys/fs/cgroup/*/; do
      h=${h%/}
      [ "$(basename "$h")" = unified ] && continue
      mountpoint -q "$h" || continue
      mkdir -p "$h/kubelet"
      if [ -f "$h/cpuset.cpus" ]; then
        [ -n "$(cat "$h/kubelet/cpuset.cpus")" ] || cat "$h/cpuset.cpus" > "$h/kubelet/cpuset.cpus"
        [ -n "$(cat "$h/kubelet/cpuset.mems")" ] || cat "$h/cpuset.mems" > "$h/kubelet/cpuset.mems"
      fi
    done
  else
    mkdir -p /sys/fs/cgroup/kubelet
  fi
  # the node's address: the CNI gateway on cni0, so nothing listens on or talks to the host's own network
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    touch "$S/host/bridge-created"
  fi
  ip addr replace "$NODE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # the apiserver listens on all addresses (pods reach it through the kubernetes Service); only loopback
  # and the pod network may connect to it or to the kubelet
  local ipt
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    if ! {
      { $ipt -w -N GPUNODE-K8S-INPUT 2>/dev/null || $ipt -w -F GPUNODE-K8S-INPUT; } &&
        $ipt -w -A GPUNODE-K8S-INPUT -i lo -j RETURN &&
        { [ "$ipt" = ip6tables ] || $ipt -w -A GPUNODE-K8S-INPUT -s "$POD_CIDR" -j RETURN; } &&
        $ipt -w -A GPUNODE-K8S-INPUT -p tcp -m multiport --dports 6443,10250 -j DROP &&
        { $ipt -w -C INPUT -j GPUNODE-K8S-INPUT 2>/dev/null || $ipt -w -I INPUT -j GPUNODE-K8S-INPUT; }
    }; then
      [ "$ipt" = iptables ] && die "could not install the iptables guard chain GPUNODE-K8S-INPUT"
      log "WARNING: $ipt guard not installed: the apiserver's port 6443 is reachable over IPv6"
    fi
  done
}

# Removes from one iptables family: every KUBE-* and GPUNODE-* chain and the rules jumping to them,
# and the rules and chains our CNI network made (bridge ipMasq and portmap tag theirs with a comment
# naming the network). Other chains (podman's CNI-*, Docker's) are left alone.
clean_iptables() {
  local save=$1 restore=$2 table script hostport=0
  command -v "$save" >/dev/null || return 0
  # portmap's shared chains go too when they did not exist before `up` (podman's CNI uses them as well)
  [ "$(cat "$S/host/$save-hostport" 2>/dev/null)" = absent ] && hostport=1
  for table in filter nat mangle raw; do
    script=$("$save" -t "$table" 2>/dev/null | awk -v net="$CNI_NET" -v table="$table" -v hostport=$hostport '
      /^:/ {
        c = substr($1, 2); chains[c] = 1
        if (c ~ /^(KUBE-|GPUNODE-)/ || (hostport && c ~ /^CNI-HOSTPORT-/)) del[c] = 1
        next
      }
      /^-A / {
        n++; rule[n] = $0; chain[n] = $2
        tgt = ""
        for (i = 3; i < NF; i++) if ($i == "-j" || $i == "-g") tgt = $(i + 1)
        target[n] = tgt
        if (index($0, "\\\"" net "\\\"") > 0 && tgt ~ /^CNI-/ && tgt !~ /^CNI-HOSTPORT-/) del[tgt] = 1
        next
      }
      END {
        out = ""
        for (i = 1; i <= n; i++) {
          if (chain[i] in del) continue
          if ((target[i] in del) || index(rule[i], "\\\"" net "\\\"") > 0) { r = rule[i]; sub(/^-A /, "-D ", r); out = out r "\n" }
        }
        for (c in del) out = out "-F " c "\n"
        for (c in del) out = out "-X " c "\n"
        if (out != "") printf "*%s\n%sCOMMIT\n", table, out
      }')
    [ -n "$script" ] || continue
    printf '%s\n' "$script" | "$restore" -w --noflush 2>/dev/null ||
      printf '%s\n' "$script" | "$restore" --noflush ||
      log "WARNING: $restore could not remove some $table rules: $(printf '%s' "$script" | head -c 400)"
  done
}

restore_host() {
  local k v line tgt prop
  if [ -f "$S/host/sysctl" ]; then
    while IFS='=' read -r k v; do
      [ -n "$k" ] && sysctl -qw "$k=$v" 2>/dev/null || true
    done < "$S/host/sysctl"
    rm -f "$S/host/sysctl"
  fi
  if [ -f "$S/host/root-propagation" ]; then
    prop=$(cat "$S/host/root-propagation")
    case "$prop" in
      private | slave | unbindable)
        [ "$(findmnt -n -o PROPAGATION /)" = "$prop" ] || mount --make-"$prop" / || log "WARNING: could not make / $prop again" ;;
    esac
    rm -f "$S/host/root-propagation"
  fi
  # the kubelet's symlinks to container logs (always /var/log/containers), libcni's result cache
  # (/var/lib/cni/results/<network>-*), containerd 2's shim sockets (always /run/containerd/s)
  find /var/log/containers -maxdepth 1 -type l -lname "$S/*" -delete 2>/dev/null || true
  rm -f /var/lib/cni/results/"$CNI_NET"-* 2>/dev/null || true
  local id
  for id in "${SANDBOX_IDS[@]}"; do rm -f /var/lib/cni/results/*-"$id"-* 2>/dev/null || true; done
  # the device-plugin socket dir is always /var/lib/kubelet/device-plugins (whatever --root-dir says)
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock
  [ -L /var/lib/kubelet/pod-resources ] && [ "$(readlink /var/lib/kubelet/pod-resources)" = "$S/kubelet/pod-resources" ] &&
    rm -f /var/lib/kubelet/pod-resources
  if [ "$(cat "$S/host/existed-var-lib-kubelet" 2>/dev/null)" = absent ]; then rm -rf /var/lib/kubelet; fi
  if [ "$(cat "$S/host/existed-run-containerd" 2>/dev/null)" = absent ]; then rm -rf /run/containerd; fi
  if [ "$(cat "$S/host/existed-var-log-containers" 2>/dev/null)" = absent ]; then rmdir /var/log/containers 2>/dev/null || true; fi
  if [ "$(cat "$S/host/existed-var-lib-cni" 2>/dev/null)" = absent ]; then
    find /var/lib/cni -depth -type d -empty -delete 2>/dev/null || true
  fi
  rm -f "$S"/host/existed-*
}

clean_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/kubelet /sys/fs/cgroup/kubelet; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ -d "$d" ] && log "WARNING: could not remove cgroup $d (processes left: $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | tr '\n' ' '))"
  done
  return 0
}

# ---------------------------------------------------------------- up

detect_host() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then CGROUP_V=2; else CGROUP_V=1; fi
  if [ -d /run/systemd/system ]; then CGROUP_DRIVER=systemd; else CGROUP_DRIVER=cgroupfs; fi
  # Without CAP_SYS_RESOURCE (some sandboxes drop it from the bounding set) nothing may lower an
  # oom_score_adj: runc then fails every pod sandbox ("nsexec: failed to update /proc/self/oom_score_adj:
  # Permission denied" / "can't get final child's PID from pipe: EOF"). containerd's
  # restrict_oom_score_adj caps the pods' values at its own, as kind does for rootless nodes.
  local capeff
  capeff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
  if (((0x$capeff >> 24) & 1)); then RESTRICT_OOM=false; else
    RESTRICT_OOM=true
    log "no CAP_SYS_RESOURCE here: containerd restrict_oom_score_adj = true, kubelet/kube-proxy oomScoreAdj 0"
  fi
}

check_ports() {
  local p busy=()
  for p in "${PORTS[@]}"; do
    [ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] || busy+=("$p")
  done
  [ ${#busy[@]} -eq 0 ] || die "ports in use: ${busy[*]} ($(ss -Hltnp | grep -E ":($(IFS='|'; echo "${busy[*]}")) " | head -3 | tr -s ' '))"
}

admin_curl() { curl -sf --max-time 2 --cacert "$S/pki/ca.crt" --cert "$S/pki/admin.crt" --key "$S/pki/admin.key" "$@"; }
node_ready() {
  "$BIN/kubectl" --kubeconfig "$S/admin.kubeconfig" get node "$NODE" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null
}

do_up() {
  [ -z "$KCM_QPS" ] || [[ "$KCM_QPS" =~ ^[1-9][0-9]{0,3}$ ]] || die "GPUNODE_K8S_KCM_QPS=$KCM_QPS: expected 1..9999"
  detect_host
  need_cmds
  find_bins
  local running=() c
  for c in "${COMPONENTS[@]}"; do pid_of "$c" >/dev/null && running+=("$c"); done
  if [ ${#running[@]} -eq ${#COMPONENTS[@]} ]; then
    log "already up (state $S)"
    echo "export KUBECONFIG=$S/admin.kubeconfig"
    return 0
  fi
  if [ ${#running[@]} -gt 0 ]; then
    log "partly up (${running[*]} run): stopping it first"
    do_down
  fi
  check_ports
  local t0
  t0=$(now)
  mkdir -p "$S"/{logs,run,host}
  export PATH="$BIN:$PATH"
  make_pki
  write_configs
  prep_host

  start etcd "$BIN/etcd" --name gpunode --data-dir "$S/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster gpunode=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn
  start containerd "$BIN/containerd" --config "$S/containerd/config.toml"
  build_images &
  local images_pid=$!
  wait_for etcd 30 curl -sf --max-time 2 http://127.0.0.1:2379/health

  start_apiserver

  wait_for containerd 30 "$BIN/ctr" --address "$S/containerd/containerd.sock" version
  wait "$images_pid" || fail images "building the images failed"
  import_images
  start_kubelet

  wait_for kube-apiserver 60 admin_curl https://127.0.0.1:6443/readyz
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$S/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$S/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$S/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
    --service-account-private-key-file="$S/pki/sa.key" --root-ca-file="$S/pki/ca.crt" \
    --cluster-signing-cert-file="$S/pki/ca.crt" --cluster-signing-key-file="$S/pki/ca.key" \
    --use-service-account-credentials=true \
    --allocate-node-cidrs=true --cluster-cidr="$POD_CIDR" --node-cidr-mask-size=24 \
    --service-cluster-ip-range="$SVC_CIDR" ${KCM_QPS:+--kube-api-qps="$KCM_QPS" --kube-api-burst=$((2 * KCM_QPS))} \
    --v="$VERBOSITY"
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$S/scheduler.kubeconfig" \
    --authentication-kubeconfig="$S/scheduler.kubeconfig" --authorization-kubeconfig="$S/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --v="$VERBOSITY"
  start kube-proxy "$BIN/kube-proxy" --config="$S/kube-proxy.yaml" --v="$VERBOSITY"

  echo "export KUBECONFIG=$S/admin.kubeconfig"
  log "waiting for node $NODE to be Ready (at most ${READY_TIMEOUT}s)"
  local tw=$SECONDS
  until [ "$(node_ready)" = True ]; do
    for c in "${COMPONENTS[@]}"; do pid_of "$c" >/dev/null || fail "$c" "$c exited"; done
    ((SECONDS - tw < READY_TIMEOUT)) || fail kubelet "node $NODE not Ready after ${READY_TIMEOUT}s: $("$BIN/kubectl" --kubeconfig "$S/admin.kubeconfig" get node "$NODE" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.message}; {end}' 2>&1)"
    sleep 0.5
  done
  for c in kube-controller-manager kube-scheduler; do wait_for "$c" 30 curl -skf --max-time 2 "https://127.0.0.1:$([ $c = kube-scheduler ] && echo 10259 || echo 10257)/healthz"; done
  wait_for kube-proxy 30 curl -sf --max-time 2 http://127.0.0.1:10256/healthz
  log "node $NODE Ready in $(elapsed "$t0") s (state $S; logs in $S/logs)"
}

# ---------------------------------------------------------------- down

# Pod processes: everything in the kubelet's cgroup tree, and the shims serving our containerd.
kill_pods() {
  local pids=() p exe
  local f
  for f in $(find /sys/fs/cgroup/*/kubelet /sys/fs/cgroup/kubelet -name cgroup.procs 2>/dev/null); do
    while read -r p; do [ -n "$p" ] && pids+=("$p"); done < "$f"
  done
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case "$(basename "${exe% (deleted)}")" in
      containerd-shim-runc-v2)
        [[ "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" == *"-address $S/containerd/containerd.sock "* ]] &&
          pids+=("${p#/proc/}") ;;
    esac
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  mapfile -t pids < <(printf '%s\n' "${pids[@]}" | sort -un) # listed once per cgroup v1 hierarchy
  log "killing ${#pids[@]} pod/shim processes"
  kill -KILL "${pids[@]}" 2>/dev/null || true
  local i
  for ((i = 0; i < 30; i++)); do
    local alive=0
    for p in "${pids[@]}"; do alive "$p" && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
}

unmount_all() {
  local m i
  for ((i = 0; i < 3; i++)); do
    # deepest first; mountinfo field 5 is the mount point (octal escapes for spaces)
    mapfile -t mounts < <(awk -v s="$S" '$5 == s || index($5, s "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
    [ ${#mounts[@]} -gt 0 ] || return 0
    for m in "${mounts[@]}"; do
      m=$(printf '%b' "$m")
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  done
  mapfile -t mounts < <(awk -v s="$S" '$5 == s || index($5, s "/") == 1 { print $5 }' /proc/self/mountinfo)
  [ ${#mounts[@]} -eq 0 ] || log "WARNING: still mounted: ${mounts[*]}"
}

do_down() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  [ -d "$S" ] || { log "nothing to do ($S does not exist)"; return 0; }
  BIN=${BIN:-$(cached_bin)}
  stop kwok 5  # test/k8s/kwok.sh's fake-node controller (its PID file is here too), when it runs
  # 1. the kubelet first, so it restarts nothing; then the pods' containers through containerd
  stop kubelet 15
  stop kube-proxy
  stop kube-scheduler
  stop kube-controller-manager
  if pid_of containerd >/dev/null && [ -x "$BIN/ctr" ]; then
    local t
    for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -a -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    sleep 0.3
    for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$t" >/dev/null 2>&1 || true; done
  fi
  stop containerd 10
  kill_pods
  stop kube-apiserver
  stop etcd
  mapfile -t SANDBOX_IDS < <(ls "$S/containerd/root/io.containerd.grpc.v1.cri/sandboxes" 2>/dev/null)
  # 2. mounts (container rootfs, pod volumes, network namespaces, the kubelet's rshared root)
  unmount_all
  # 3. network: veths on cni0, cni0, iptables
  local l
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    for l in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
      ip link del "$l" 2>/dev/null || true
    done
    if [ -f "$S/host/bridge-created" ] || [ "$(ip -o -4 addr show dev "$BRIDGE" 2>/dev/null | awk '{print $4}')" = "$NODE_IP/24" ]; then
      ip link del "$BRIDGE" 2>/dev/null || log "WARNING: could not delete $BRIDGE"
    fi
  fi
  rm -f "$S/host/bridge-created"
  clean_iptables iptables-save iptables-restore
  clean_iptables ip6tables-save ip6tables-restore
  rm -f "$S/host/iptables-save-hostport" "$S/host/ip6tables-save-hostport"
  # 4. host settings, cgroups, runtime data (certificates, images and logs are kept)
  restore_host
  clean_cgroups
  rm -rf "$S/etcd" "$S/containerd" "$S/kubelet" "$S/cni" "$S/run" "$S/pod-logs"
  if [ "${PURGE:-0}" = 1 ]; then rm -rf "$S"; log "deleted $S"; fi
  log "down"
}

# ---------------------------------------------------------------- status

do_status() {
  local c pid rc=0
  for c in "${COMPONENTS[@]}"; do
    if pid=$(pid_of "$c"); then printf '%-24s running  pid %s\n' "$c" "$pid"
    else printf '%-24s stopped\n' "$c"; rc=3; fi
  done
  if pid_of kube-apiserver >/dev/null && [ -f "$S/admin.kubeconfig" ]; then
    local kc
    kc=$(dirname "$(readlink "/proc/$(pid_of kube-apiserver)/exe")")/kubectl
    [ -x "$kc" ] || kc=$(command -v kubectl || echo kubectl)
    printf 'node %s Ready: %s\n' "$NODE" "$("$kc" --kubeconfig "$S/admin.kubeconfig" get node "$NODE" \
      -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} ({.status.conditions[?(@.type=="Ready")].message})' 2>&1)" || rc=3
    echo "export KUBECONFIG=$S/admin.kubeconfig"
  fi
  return $rc
}

case "${1:-}" in
  up) do_up ;;
  down)
    [ "${2:-}" = --purge ] && PURGE=1
    do_down ;;
  status) do_status ;;
  restart-kubelet) do_restart_kubelet ;;
  restart-containerd) do_restart_containerd ;;
  restart-apiserver) do_restart_apiserver ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
