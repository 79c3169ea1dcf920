# shellcheck shell=bash
# The local node: containerd with Debian's runc, kubelet, kube-proxy (nftables), the CNI bridge
# and kube-router as the NetworkPolicy enforcer, next to the control plane of local-cluster.sh.
# Sourced by hack/local-cluster.sh.
#
# Addresses: everything lives in 198.18.0.0/15 (reserved for network testing, outside the
# private ranges), on a bridge the run creates. An nftables table drops any packet from or to
# that range leaving through an interface the run did not create, so no test packet leaves the
# machine. Stop undoes all of it by what start recorded: processes by PID, mounts under the
# state directory, nftables tables, iptables chains and ipsets that were not there before,
# cgroups, the bridge and net.ipv4.ip_forward.

NODE_NAME="${NODE_NAME:-gate-node}"
BRIDGE="gatebr0"           # the guard lets "gate*" interfaces carry the test range
NODE_IP="198.18.0.1"       # the bridge's address: the node, the API server, the pods' gateway
POD_CIDR="198.18.0.0/24"
SERVICE_CIDR="198.18.16.0/24"
CLUSTER_DNS="198.18.16.10"
TEST_RANGE="198.18.0.0/15"
GUARD_TABLE="gate_local_guard"
# The "outside world" of the tests: a network namespace the run creates, reached through the
# veth gate-ext0, with TCP listeners on 80, 443 and 8443 at each address below. Names resolve
# through the cluster DNS stand-in (testbed dns, the kube-dns Service at CLUSTER_DNS).
EXT_NETNS="gate-ext"
EXT_GATEWAY="198.18.40.1"
EXT_ADDRS=(198.18.40.10 198.18.40.20 198.18.40.30 198.18.41.10 198.18.41.254)
DNS_RECORDS=(api.anthropic.com=198.18.40.10 github.com=198.18.40.20 unlisted.example.org=198.18.40.30
  managed-agents.fakes.svc.cluster.local=198.18.16.11)
NODE_PROCS=(containerd kubelet kube-proxy kube-router kube-scheduler)
# The local OCI registry (hack/registry) on loopback: containerd names it the server of every
# registry host, so the node pulls gate-operator's images from it by digest and nothing else.
# REGISTRY_AUTH_PORT answers the same repositories only with the credentials node_registry
# writes; containerd reaches it for images named registry.gate.test/... (the pull-secret case).
REGISTRY_PORT="${REGISTRY_PORT:-25000}"
REGISTRY_AUTH_PORT="${REGISTRY_AUTH_PORT:-$((REGISTRY_PORT + 1))}"
REGISTRY_AUTH_HOST="registry.gate.test"

node_dirs() {
  eval "$("${ROOT}/hack/build-node.sh" --print)"
  NODE_DIR="${DIR}/node"
  CONTAINERD_SOCK="${NODE_DIR}/containerd/containerd.sock"
}

TESTBED_IMAGE="localhost/gate-operator-test/testbed:v1"

ctr_() { "${CONTAINERD_DIR}/ctr" --address "${CONTAINERD_SOCK}" -n k8s.io "$@"; }

# node_record saves what start changes, so that stop restores exactly that.
node_record() {
  local pre="${NODE_DIR}/pre"
  mkdir -p "${pre}"
  cat /proc/sys/net/ipv4/ip_forward >"${pre}/ip_forward"
  nft list tables 2>/dev/null | awk '{print $2, $3}' >"${pre}/nft-tables"
  ipset list -n 2>/dev/null | sort >"${pre}/ipsets" || true
  [[ -d /run/containerd ]] && touch "${pre}/run-containerd" || true
  [[ -d /var/lib/cni ]] && touch "${pre}/var-lib-cni" || true
  local c
  for c in /sys/fs/cgroup/*/; do [[ -d "${c}kubepods" ]] && echo "${c}kubepods"; done >"${pre}/kubepods" || true
}

node_network() {
  say "network: bridge ${BRIDGE} ${NODE_IP}/24, guard table ${GUARD_TABLE}, ip_forward on"
  ip link add "${BRIDGE}" type bridge
  ip addr add "${NODE_IP}/24" dev "${BRIDGE}"
  ip link set "${BRIDGE}" up
  # Routed traffic of the test range may only use the run's own interfaces.
  nft -f - <<NFT
table inet ${GUARD_TABLE} {
  chain postrouting {
    type filter hook postrouting priority -300; policy accept;
    oifname "gate*" accept
    oifname "lo" accept
    ip saddr ${TEST_RANGE} counter drop
    ip daddr ${TEST_RANGE} counter drop
  }
}
NFT
  echo 1 >/proc/sys/net/ipv4/ip_forward
}

# node_config writes the configuration of containerd, the CNI bridge, kubelet and kube-proxy.
# Settings each of them needs on these machines (Firecracker VM, cgroup v1, root without
# CAP_SYS_RESOURCE):
# - containerd: restrict_oom_score_adj, or every sandbox fails with "can't get final child's
#   PID from pipe" (root cannot lower oom_score_adj here); cgroupfs, Debian's runc, no NRI, the
#   locally built pause image pinned as the sandbox image, network namespaces and CNI files
#   under the state directory so that stop finds them.
# - kubelet: failCgroupV1 false and cgroupDriver cgroupfs (cgroup v1, no systemd); no swap
#   check; no iptables utility chains (kube-proxy runs nftables); no eviction thresholds and no
#   local storage isolation (the VM's disk and memory are not a node's); image GC off, since
#   nothing could pull an image it removed; client certificates for the API server's calls.
# - kube-proxy: nftables mode; it leaves conntrack sysctls alone (nothing to restore).
# - CNI: a bridge that is the pods' gateway, without masquerade (no pod address may leave).
node_config() {
  local d="${NODE_DIR}"
  mkdir -p "${d}/containerd" "${d}/cni/conf" "${d}/cni/ipam" "${d}/kubelet" "${d}/pod-logs"
  cat >"${d}/containerd/config.toml" <<TOML
version = 3
root = "${d}/containerd/root"
state = "${d}/containerd/state"
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "${CONTAINERD_SOCK}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "${PAUSE_IMAGE}"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "${d}/containerd/certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["${CNI_DIR}"]
    conf_dir = "${d}/cni/conf"
TOML
  # Every registry host's server is the local registry (plain HTTP on loopback): a host with a
  # server of its own is never tried, so no pull falls back to the real registry. _default
  # covers every name without a directory of its own; ghcr.io is written out to say so.
  local h
  for h in _default ghcr.io; do
    mkdir -p "${d}/containerd/certs.d/${h}"
    printf 'server = "http://127.0.0.1:%s"\n' "${REGISTRY_PORT}" >"${d}/containerd/certs.d/${h}/hosts.toml"
  done
  mkdir -p "${d}/containerd/certs.d/${REGISTRY_AUTH_HOST}"
  printf 'server = "http://127.0.0.1:%s"\n' "${REGISTRY_AUTH_PORT}" >"${d}/containerd/certs.d/${REGISTRY_AUTH_HOST}/hosts.toml"
  cat >"${d}/cni/conf/10-gate-local.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "gate-local",
  "plugins": [
    {
      "type": "bridge", "bridge": "${BRIDGE}", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "${d}/cni/ipam", "ranges": [[{"subnet": "${POD_CIDR}", "gateway": "${NODE_IP}"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  # Pods get the cluster DNS only: nothing of the machine's resolver leaks into them.
  printf 'nameserver %s\n' "${CLUSTER_DNS}" >"${d}/resolv.conf"
  cat >"${d}/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://${CONTAINERD_SOCK}
makeIPTablesUtilChains: false
localStorageCapacityIsolation: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
address: ${NODE_IP}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
podLogsDir: ${d}/pod-logs
resolvConf: ${d}/resolv.conf
clusterDNS: [${CLUSTER_DNS}]
clusterDomain: cluster.local
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${DIR}/pki/ca.crt}
authorization:
  mode: Webhook
serializeImagePulls: false
# Pods see ConfigMap updates (a new policy snapshot) within about 10 s instead of a minute.
syncFrequency: 10s
YAML
  cat >"${d}/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: ${KUBECONFIG_FILE}}
hostnameOverride: ${NODE_NAME}
clusterCIDR: ${POD_CIDR}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["${NODE_IP}/32"]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
}

registry_up() { port_in_use "${REGISTRY_PORT}" && port_in_use "${REGISTRY_AUTH_PORT}"; }

# node_registry starts the local registry on loopback, with fresh credentials for its
# authenticated address (registry-credentials, "user:password", read by internal/localenv for
# the pull secret).
node_registry() {
  local r="${NODE_DIR}/registry"
  mkdir -p "${r}"
  (umask 077 && printf 'gate:%s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"${r}/credentials")
  (cd "${ROOT}" && CGO_ENABLED=0 go build -o "${r}/registry" ./hack/registry)
  say "starting the local registry on 127.0.0.1:${REGISTRY_PORT} (and 127.0.0.1:${REGISTRY_AUTH_PORT} with credentials, as ${REGISTRY_AUTH_HOST})"
  start_bg registry "${r}/registry" serve -addr "127.0.0.1:${REGISTRY_PORT}" -auth-addr "127.0.0.1:${REGISTRY_AUTH_PORT}" \
    -credentials "${r}/credentials" -blobs "${r}/blobs"
  wait_for registry 30 registry_up || { tail -20 "${DIR}/registry.log" >&2; return 1; }
}

# node_images builds gate-operator's images (an OCI layout of two-platform indexes) and pushes
# them to the local registry, where the node pulls them by digest; only the test images (pause,
# testbed), which no registry serves, are imported into containerd.
node_images() {
  say "building the images (make images, and the test images: pause and testbed)"
  # GATE_IMAGES_BIN: a directory of prebuilt manager, confirmer, gate-hook, gate-hook-cel, egress-wait, gate-agent and gate-client binaries to use.
  (cd "${ROOT}" && go run ./hack/images ${GATE_IMAGES_BIN:+-bin "${GATE_IMAGES_BIN}"} -out "${ROOT}/bin/images" -test-images "${ROOT}/bin/images/test" -busybox "${ROOT}/bin/node/busybox" >"${NODE_DIR}/images-built.txt")
  "${NODE_DIR}/registry/registry" push -layout "${ROOT}/bin/images/oci" -registry "127.0.0.1:${REGISTRY_PORT}" >"${NODE_DIR}/images.txt"
  local tar
  for tar in "${ROOT}"/bin/images/test/*.tar; do
    ctr_ images import --local "${tar}" >/dev/null 2>"${NODE_DIR}/ctr-import.log" || { cat "${NODE_DIR}/ctr-import.log" >&2; return 1; }
  done
  say "images pushed to the local registry (index digests):"
  sed 's/^/  /' "${NODE_DIR}/images.txt"
  node_sign
}

# node_sign does what a release does after pushing (hack/release, cosign's libraries, offline):
# a key pair of its own (release-key/, its password beside it), each pushed index's CycloneDX
# SBOM from the Go build information of the binaries in it (sbom/<name>.cdx.json), a cosign
# signature of the index and a signed attestation of the SBOM. internal/localenv verifies them.
node_sign() {
  local rel="${ROOT}/bin/release" key="${NODE_DIR}/release-key" ref digest repo image
  (cd "${ROOT}" && hack/build-tool.sh "${rel}" hack/release)
  mkdir -p "${key}" "${NODE_DIR}/sbom"
  (umask 077 && head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"${key}/password")
  COSIGN_PASSWORD="$(cat "${key}/password")" "${rel}" keygen -dir "${key}" >/dev/null
  local epoch="${SOURCE_DATE_EPOCH:-$(git -C "${ROOT}" log -1 --format=%ct)}"
  while read -r ref digest; do
    repo="${ref%:*}"
    image="127.0.0.1:${REGISTRY_PORT}/${repo#*/}@${digest}"
    "${rel}" sbom -image "${image}" -name "${repo}" -version "${ref##*:}" -epoch "${epoch}" -o "${NODE_DIR}/sbom/${repo##*/}.cdx.json"
    COSIGN_PASSWORD="$(cat "${key}/password")" "${rel}" sign -key "${key}/cosign.key" -sbom "${NODE_DIR}/sbom/${repo##*/}.cdx.json" \
      -identity "${repo}" "${image}" >>"${NODE_DIR}/sign.log"
  done <"${NODE_DIR}/images.txt"
  say "signed each index and attested its SBOM (key ${key}/cosign.pub; sign.log)"
}

wait_for() { # WHAT SECONDS COMMAND...: polls COMMAND every 0.5 s
  local what="$1" secs="$2" i; shift 2
  for i in $(seq 1 $((secs * 2))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  say "${what} not ready after ${secs}s"
  return 1
}

# node_outside creates the outside network namespace and its listeners.
node_outside() {
  say "outside hosts: netns ${EXT_NETNS} with ${EXT_ADDRS[*]} (listening on 80, 443, 8443)"
  (cd "${ROOT}" && CGO_ENABLED=0 go build -o "${NODE_DIR}/testbed" ./hack/testbed)
  ip netns add "${EXT_NETNS}"
  ip link add gate-ext0 type veth peer name ext0 netns "${EXT_NETNS}"
  ip addr add "${EXT_GATEWAY}/24" dev gate-ext0
  ip link set gate-ext0 up
  local a
  ip -n "${EXT_NETNS}" link set lo up
  ip -n "${EXT_NETNS}" addr add "${EXT_ADDRS[0]}/24" dev ext0
  for a in "${EXT_ADDRS[@]:1}"; do ip -n "${EXT_NETNS}" addr add "${a}/32" dev ext0; done
  ip -n "${EXT_NETNS}" link set ext0 up
  ip -n "${EXT_NETNS}" route add default via "${EXT_GATEWAY}"
  ip route add 198.18.41.0/24 via "${EXT_ADDRS[0]}" dev gate-ext0
  start_bg ext-listener ip netns exec "${EXT_NETNS}" "${NODE_DIR}/testbed" listen 80 443 8443
}

# node_dns runs the cluster DNS stand-in: testbed dns in kube-system behind the kube-dns
# Service, labelled k8s-app=kube-dns like CoreDNS (the manager's default --dns-pod-labels).
node_dns() {
  say "cluster DNS stand-in at ${CLUSTER_DNS}: ${DNS_RECORDS[*]}"
  local args="" r
  for r in "${DNS_RECORDS[@]}"; do args+=", \"${r}\""; done
  kubectl --kubeconfig "${KUBECONFIG_FILE}" apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      automountServiceAccountToken: false
      # Port 53 like CoreDNS, since NetworkPolicies name the pod's port: a policy allowing DNS
      # allows 53 (the safe sysctl lets the non-root user bind it).
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: "53"}]
      containers:
      - name: dns
        image: ${TESTBED_IMAGE}
        imagePullPolicy: Never
        args: ["dns", "-listen", ":53"${args}]
        ports: [{containerPort: 53, protocol: UDP}, {containerPort: 53, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: ${CLUSTER_DNS}
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, targetPort: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 53, protocol: TCP}
YAML
  kubectl --kubeconfig "${KUBECONFIG_FILE}" -n kube-system rollout status deployment/kube-dns --timeout=60s >/dev/null
}

node_start() {
  node_config
  node_registry
  say "starting containerd"
  PATH="${CONTAINERD_DIR}:${PATH}" start_bg containerd "${CONTAINERD_DIR}/containerd" --config "${NODE_DIR}/containerd/config.toml"
  wait_for containerd 30 ctr_ version || { tail -20 "${DIR}/containerd.log" >&2; return 1; }
  node_images
  say "starting kube-scheduler"
  start_bg kube-scheduler "${BIN}/kube-scheduler" --kubeconfig "${KUBECONFIG_FILE}" \
    --authentication-kubeconfig "${KUBECONFIG_FILE}" --authorization-kubeconfig "${KUBECONFIG_FILE}" \
    --leader-elect=false --secure-port 0
  say "starting kubelet (node ${NODE_NAME} at ${NODE_IP})"
  start_bg kubelet "${BIN}/kubelet" --config "${NODE_DIR}/kubelet/config.yaml" --kubeconfig "${KUBECONFIG_FILE}" \
    --root-dir "${NODE_DIR}/kubelet/root" --cert-dir "${NODE_DIR}/kubelet/pki" \
    --hostname-override "${NODE_NAME}" --node-ip "${NODE_IP}"
  say "starting kube-proxy (nftables)"
  start_bg kube-proxy "${BIN}/kube-proxy" --config "${NODE_DIR}/kube-proxy.yaml"
  say "waiting for node ${NODE_NAME} to be Ready"
  wait_for "node ${NODE_NAME}" 90 kubectl --kubeconfig "${KUBECONFIG_FILE}" wait --for=condition=Ready "node/${NODE_NAME}" --timeout=1s \
    || { tail -20 "${DIR}/kubelet.log" >&2; return 1; }
  local cidr
  cidr="$(kubectl --kubeconfig "${KUBECONFIG_FILE}" get node "${NODE_NAME}" -o jsonpath='{.spec.podCIDR}')"
  say "node ${NODE_NAME} Ready, podCIDR ${cidr:-none}"
  # kube-router identifies its node by name at start, so it starts once the node exists.
  say "starting kube-router (NetworkPolicy enforcement only)"
  start_bg kube-router "${KUBE_ROUTER_DIR}/kube-router" --kubeconfig "${KUBECONFIG_FILE}" \
    --hostname-override "${NODE_NAME}" --run-firewall=true --run-router=false --run-service-proxy=false \
    --enable-cni=false --enable-ipv6=false --metrics-port 0 --health-port 0
  wait_for "kube-router's firewall chains" 30 iptables -S KUBE-ROUTER-FORWARD \
    || { tail -20 "${DIR}/kube-router.log" >&2; return 1; }
  node_outside
  node_dns
}

stop_pid() { # NAME: SIGTERM the recorded PID, SIGKILL after 10 s
  local name="$1" pid
  [[ -f "${DIR}/${name}.pid" ]] || return 0
  pid="$(cat "${DIR}/${name}.pid")"
  if kill "${pid}" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
    kill -9 "${pid}" 2>/dev/null || true
    say "stopped ${name}"
  fi
  rm -f "${DIR}/${name}.pid"
}

# node_stop removes the node's pods, processes and every trace start left, in the order
# teardown needs.
node_stop() {
  node_dirs
  [[ -d "${NODE_DIR}" ]] || return 0
  local kc=(kubectl --kubeconfig "${KUBECONFIG_FILE}" --request-timeout=5s)
  # No controller may recreate what is deleted next; then the kubelet tears the pods down, so
  # CNI DEL runs and their volumes are unmounted.
  stop_pid kube-controller-manager
  stop_pid kube-scheduler
  if [[ -f "${DIR}/kubelet.pid" ]] && kill -0 "$(cat "${DIR}/kubelet.pid")" 2>/dev/null; then
    say "deleting every pod"
    "${kc[@]}" delete pods --all --all-namespaces --grace-period=2 --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do
      [[ -z "$("${kc[@]}" get pods -A -o name 2>/dev/null)" ]] && break
      sleep 0.5
    done
  fi
  local name
  for name in kube-router kube-proxy kubelet ext-listener registry; do stop_pid "${name}"; done
  ip netns del "${EXT_NETNS}" 2>/dev/null || true
  # Containers the kubelet did not get to: their shims run with our containerd's address.
  local shims=() p
  for p in /proc/[0-9]*; do
    if tr '\0' ' ' 2>/dev/null <"${p}/cmdline" | grep -qF -- "-address ${CONTAINERD_SOCK}"; then shims+=("${p#/proc/}"); fi
  done
  stop_pid containerd
  if [[ ${#shims[@]} -gt 0 ]]; then
    say "killing ${#shims[@]} leftover shim(s) and their containers"
    for p in "${shims[@]}"; do pkill -9 -P "${p}" 2>/dev/null || true; kill -9 "${p}" 2>/dev/null || true; done
  fi
  # Mounts under the state directory (pod volumes, overlay rootfs, network namespaces), deepest first.
  awk -v d="${DIR}/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "${m}" 2>/dev/null || true
  done
  ip link del "${BRIDGE}" 2>/dev/null || true
  # veths of pods whose netns is gone are gone with it; nftables and iptables state is removed
  # only if it was not there before start.
  local pre="${NODE_DIR}/pre" t
  for t in "inet ${GUARD_TABLE}" "ip kube-proxy" "ip6 kube-proxy"; do
    nft delete table ${t} 2>/dev/null || true
  done
  node_iptables_clean
  if [[ -f "${pre}/nft-tables" ]]; then
    { nft list tables 2>/dev/null || true; } | awk '{print $2, $3}' | while read -r fam tbl; do
      case "${tbl}" in filter|nat|mangle|raw) ;; *) continue ;; esac
      grep -qx "${fam} ${tbl}" "${pre}/nft-tables" || nft delete table "${fam}" "${tbl}" 2>/dev/null || true
    done
  fi
  if [[ -f "${pre}/ipsets" ]]; then
    { ipset list -n 2>/dev/null || true; } | sort | comm -23 - "${pre}/ipsets" | while read -r s; do ipset destroy "${s}" 2>/dev/null || true; done
  fi
  [[ -f "${pre}/ip_forward" ]] && cat "${pre}/ip_forward" >/proc/sys/net/ipv4/ip_forward
  # The kubelet's cgroups (cgroupfs driver), deepest first, if start created them.
  local c
  for c in /sys/fs/cgroup/*/kubepods; do
    [[ -d "${c}" ]] || continue
    grep -qx "${c}" "${pre}/kubepods" 2>/dev/null && continue
    find "${c}" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  # What containerd and libcni write outside the state directory.
  rm -f /var/lib/cni/results/gate-local-* 2>/dev/null || true
  [[ -f "${pre}/var-lib-cni" ]] || rm -rf /var/lib/cni
  [[ -f "${pre}/run-containerd" ]] || rm -rf /run/containerd
  say "node removed"
}

# node_iptables_clean removes kube-router's chains (its --cleanup-config panics without IPVS):
# first the rules that jump to them, then the chains.
node_iptables_clean() {
  local table chain rule
  for table in filter nat mangle; do
    { iptables -t "${table}" -S 2>/dev/null || true; } | { grep -E '^-A [A-Z]+ .*-j (KUBE-ROUTER|KUBE-POD-FW|KUBE-NWPLCY)' || true; } | while read -r rule; do
      eval "iptables -t ${table} ${rule/-A/-D}" 2>/dev/null || true
    done
    for chain in $(iptables -t "${table}" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-ROUTER|KUBE-POD-FW|KUBE-NWPLCY)/ {print $2}'); do
      iptables -t "${table}" -F "${chain}" 2>/dev/null || true
    done
    for chain in $(iptables -t "${table}" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-ROUTER|KUBE-POD-FW|KUBE-NWPLCY)/ {print $2}'); do
      iptables -t "${table}" -X "${chain}" 2>/dev/null || true
    done
  done
}
