#!/usr/bin/env bash
# A local Kubernetes cluster from the binaries hack/build-control-plane.sh and
# hack/build-node.sh build: etcd and kube-apiserver on loopback, plus kube-controller-manager
# with --controller-manager; with --node, a real node too (containerd, kubelet, kube-proxy,
# kube-scheduler, kube-router, the CNI bridge; hack/lib/node.sh), the API server on the node's
# bridge address, gate-operator's images pushed to a local OCI registry that containerd pulls
# them from (hack/registry), and the test images imported into containerd.
#
#   hack/local-cluster.sh start [--controller-manager | --node]   start it; prints the kubeconfig path
#   hack/local-cluster.sh stop                                    stop it and remove its state
#
# State (data, certificates, logs, kubeconfig) lives in $LOCAL_CLUSTER_DIR (default
# tmp/local-cluster). Ports: $ETCD_PORT (default 23790), $APISERVER_PORT (default 16443), and
# with --node the registry's $REGISTRY_PORT (default 25000) and $REGISTRY_AUTH_PORT (default
# REGISTRY_PORT + 1).
# --node needs root; the first start builds the node's components (about 15 minutes on 2 cores).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
BIN="${ROOT}/bin/k8s/${K8S_VERSION}"
DIR="${LOCAL_CLUSTER_DIR:-${ROOT}/tmp/local-cluster}"
ETCD_PORT="${ETCD_PORT:-23790}"
APISERVER_PORT="${APISERVER_PORT:-16443}"
KUBECONFIG_FILE="${DIR}/kubeconfig"

say() { printf '[local-cluster %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# shellcheck source=hack/lib/node.sh
source "${ROOT}/hack/lib/node.sh"
PAUSE_IMAGE="localhost/gate-operator-test/pause:v1"

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_bg() { # NAME CMD...: starts CMD in the background, logging to DIR/NAME.log
  local name="$1"; shift
  "$@" >"${DIR}/${name}.log" 2>&1 &
  echo $! >"${DIR}/${name}.pid"
}

wait_ready() {
  local i
  for i in $(seq 1 120); do
    if kubectl --kubeconfig "${KUBECONFIG_FILE}" get --raw /readyz >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  say "kube-apiserver did not become ready in 60s; its log:"
  tail -30 "${DIR}/kube-apiserver.log" >&2
  return 1
}

start() {
  local with_kcm=false with_node=false
  case "${1:-}" in
    --controller-manager) with_kcm=true ;;
    --node) with_kcm=true with_node=true ;;
    "") ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  if [[ -f "${DIR}/kube-apiserver.pid" ]] && kill -0 "$(cat "${DIR}/kube-apiserver.pid")" 2>/dev/null; then
    say "already running; kubeconfig ${KUBECONFIG_FILE}"
    return
  fi
  if ${with_node}; then
    [[ "$(id -u)" == 0 ]] || { say "--node needs root (it creates a bridge, nftables rules, mounts and cgroups)"; exit 1; }
    "${ROOT}/hack/build-node.sh"
  else
    local need=(etcd kube-apiserver) missing=()
    ${with_kcm} && need+=(kube-controller-manager)
    for b in "${need[@]}"; do [[ -x "${BIN}/${b}" ]] || missing+=("${b}"); done
    if [[ ${#missing[@]} -gt 0 ]]; then
      "${ROOT}/hack/build-control-plane.sh" "${missing[@]}"
    fi
  fi
  # What a previous run left (a crash, a kill -9) is removed first, mounts included.
  [[ -d "${DIR}" ]] && stop
  local ports=("${ETCD_PORT}" "$((ETCD_PORT + 10))" "${APISERVER_PORT}")
  ${with_node} && ports+=("${REGISTRY_PORT}" "${REGISTRY_AUTH_PORT}")
  for p in "${ports[@]}"; do
    if port_in_use "${p}"; then say "port ${p} is in use; set ETCD_PORT / APISERVER_PORT / REGISTRY_PORT / REGISTRY_AUTH_PORT"; exit 1; fi
  done
  mkdir -p "${DIR}/certs"
  say "state in ${DIR}"
  (cd "${ROOT}" && go run ./hack/genkey "${DIR}/sa.key" "${DIR}/sa.pub")
  local api_host=127.0.0.1 service_cidr=10.0.0.0/24 node_flags=() kcm_flags=()
  if ${with_node}; then
    node_dirs
    mkdir -p "${NODE_DIR}"
    node_record
    node_network
    (cd "${ROOT}" && go run ./hack/genkey --pki "${DIR}/pki")
    api_host="${NODE_IP}" service_cidr="${SERVICE_CIDR}"
    # Pods reach the API server at the bridge address; it reaches kubelets by their InternalIP
    # with a client certificate the kubelet trusts.
    node_flags=(--advertise-address "${NODE_IP}" --kubelet-preferred-address-types InternalIP
      --kubelet-client-certificate "${DIR}/pki/kubelet-client.crt" --kubelet-client-key "${DIR}/pki/kubelet-client.key")
    # In-cluster clients verify the API server with kube-root-ca.crt, which needs --root-ca-file;
    # the node's podCIDR is allocated from the pod range.
    kcm_flags=(--root-ca-file "${DIR}/certs/apiserver.crt" --allocate-node-cidrs --cluster-cidr "${POD_CIDR}"
      --node-cidr-mask-size 24 --service-cluster-ip-range "${SERVICE_CIDR}")
  fi
  local token
  token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "${token},admin,admin,system:masters" >"${DIR}/tokens.csv"
  chmod 600 "${DIR}/tokens.csv"
  cat >"${KUBECONFIG_FILE}" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://${api_host}:${APISERVER_PORT}", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: "${token}"}
contexts:
- name: local
  context: {cluster: local, user: admin, namespace: default}
current-context: local
KUBECONFIG
  chmod 600 "${KUBECONFIG_FILE}"

  say "starting etcd on 127.0.0.1:${ETCD_PORT}"
  start_bg etcd "${BIN}/etcd" --data-dir "${DIR}/etcd" \
    --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-cluster "default=http://127.0.0.1:$((ETCD_PORT + 10))"
  say "starting kube-apiserver on ${api_host}:${APISERVER_PORT}"
  start_bg kube-apiserver "${BIN}/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:${ETCD_PORT}" --secure-port "${APISERVER_PORT}" --bind-address "${api_host}" "${node_flags[@]}" \
    --cert-dir "${DIR}/certs" --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "${DIR}/sa.pub" --service-account-signing-key-file "${DIR}/sa.key" \
    --token-auth-file "${DIR}/tokens.csv" --authorization-mode RBAC --service-cluster-ip-range "${service_cidr}"
  wait_ready
  if ${with_kcm}; then
    say "starting kube-controller-manager"
    start_bg kube-controller-manager "${BIN}/kube-controller-manager" \
      --kubeconfig "${KUBECONFIG_FILE}" --authentication-kubeconfig "${KUBECONFIG_FILE}" --authorization-kubeconfig "${KUBECONFIG_FILE}" \
      --service-account-private-key-file "${DIR}/sa.key" --use-service-account-credentials \
      --controllers '*,-csrsigning' --leader-elect=false --secure-port 0 "${kcm_flags[@]}"
  fi
  if ${with_node}; then
    node_start
  fi
  say "ready: export KUBECONFIG=${KUBECONFIG_FILE}"
}

stop() {
  local name pid
  node_stop
  for name in kube-controller-manager kube-apiserver etcd; do
    [[ -f "${DIR}/${name}.pid" ]] || continue
    pid="$(cat "${DIR}/${name}.pid")"
    if kill "${pid}" 2>/dev/null; then
      for _ in $(seq 1 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
      kill -9 "${pid}" 2>/dev/null || true
      say "stopped ${name}"
    fi
  done
  rm -rf "${DIR}"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop ;;
  *) echo "usage: $0 start [--controller-manager | --node] | stop" >&2; exit 2 ;;
esac
