#!/usr/bin/env bash
# A local Kubernetes control plane on loopback, from the binaries hack/build-control-plane.sh
# builds: etcd and kube-apiserver, plus kube-controller-manager with --controller-manager.
#
#   hack/local-cluster.sh start [--controller-manager]   start it; prints the kubeconfig path
#   hack/local-cluster.sh stop                           stop it and remove its state
#
# State (data, certificates, logs, kubeconfig) lives in $LOCAL_CLUSTER_DIR (default
# tmp/local-cluster). Ports: $ETCD_PORT (default 23790), $APISERVER_PORT (default 16443).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
BIN="${ROOT}/bin/k8s/${K8S_VERSION}"
DIR="${LOCAL_CLUSTER_DIR:-${ROOT}/tmp/local-cluster}"
ETCD_PORT="${ETCD_PORT:-23790}"
APISERVER_PORT="${APISERVER_PORT:-16443}"
KUBECONFIG_FILE="${DIR}/kubeconfig"

say() { printf '[local-cluster] %s\n' "$*"; }

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
  local with_kcm=false
  [[ "${1:-}" == "--controller-manager" ]] && with_kcm=true
  local need=(etcd kube-apiserver)
  ${with_kcm} && need+=(kube-controller-manager)
  local missing=()
  for b in "${need[@]}"; do [[ -x "${BIN}/${b}" ]] || missing+=("${b}"); done
  if [[ ${#missing[@]} -gt 0 ]]; then
    "${ROOT}/hack/build-control-plane.sh" "${missing[@]}"
  fi
  if [[ -f "${DIR}/kube-apiserver.pid" ]] && kill -0 "$(cat "${DIR}/kube-apiserver.pid")" 2>/dev/null; then
    say "already running; kubeconfig ${KUBECONFIG_FILE}"
    return
  fi
  for p in "${ETCD_PORT}" "$((ETCD_PORT + 10))" "${APISERVER_PORT}"; do
    if port_in_use "${p}"; then say "port ${p} is in use; set ETCD_PORT / APISERVER_PORT"; exit 1; fi
  done
  rm -rf "${DIR}" && mkdir -p "${DIR}/certs"
  say "state in ${DIR}"
  (cd "${ROOT}" && go run ./hack/genkey "${DIR}/sa.key" "${DIR}/sa.pub")
  local token
  token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "${token},admin,admin,system:masters" >"${DIR}/tokens.csv"
  chmod 600 "${DIR}/tokens.csv"
  cat >"${KUBECONFIG_FILE}" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:${APISERVER_PORT}", insecure-skip-tls-verify: true}
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
  say "starting kube-apiserver on 127.0.0.1:${APISERVER_PORT}"
  start_bg kube-apiserver "${BIN}/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:${ETCD_PORT}" --secure-port "${APISERVER_PORT}" --bind-address 127.0.0.1 \
    --cert-dir "${DIR}/certs" --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "${DIR}/sa.pub" --service-account-signing-key-file "${DIR}/sa.key" \
    --token-auth-file "${DIR}/tokens.csv" --authorization-mode RBAC --service-cluster-ip-range 10.0.0.0/24
  wait_ready
  if ${with_kcm}; then
    say "starting kube-controller-manager"
    start_bg kube-controller-manager "${BIN}/kube-controller-manager" \
      --kubeconfig "${KUBECONFIG_FILE}" --authentication-kubeconfig "${KUBECONFIG_FILE}" --authorization-kubeconfig "${KUBECONFIG_FILE}" \
      --service-account-private-key-file "${DIR}/sa.key" --use-service-account-credentials \
      --controllers '*,-csrsigning' --leader-elect=false --secure-port 0
  fi
  say "ready: export KUBECONFIG=${KUBECONFIG_FILE}"
}

stop() {
  local name pid
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
  *) echo "usage: $0 start [--controller-manager] | stop" >&2; exit 2 ;;
esac
