#!/usr/bin/env bash
# Builds what a local node needs, once, into bin/: kubelet, kube-proxy and kube-scheduler (the
# control plane's wrapper module, into bin/k8s/<version>/), containerd with ctr and the runc shim,
# the CNI plugins and kube-router (the NetworkPolicy enforcer), each from the Go module proxy into
# bin/node/<name>-<version>/. A component whose directory holds all of its binaries is never
# rebuilt. A static busybox is unpacked from Debian's busybox-static for the test images.
# Debian's runc, iptables, nftables, conntrack and ipset are installed with apt-get when
# missing. Why these: kubelet 1.37 needs containerd 2.x (Debian's 1.6 is too old); kube-router
# because kube-network-policies needs nfqueue, which these kernels lack; v2.1.0 is the only
# kube-router release the module proxy serves, with reported security flaws: test use only.
#
# Usage: hack/build-node.sh            build what is missing
#        hack/build-node.sh --print    print the directories the node scripts read (for callers)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.10.0}"
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
NODE_BIN="${ROOT}/bin/node"
CONTAINERD_DIR="${NODE_BIN}/containerd-${CONTAINERD_VERSION}"
CNI_DIR="${NODE_BIN}/cni-plugins-${CNI_PLUGINS_VERSION}"
KUBE_ROUTER_DIR="${NODE_BIN}/kube-router-${KUBE_ROUTER_VERSION}"
# strace: the conformance suite traces every connect of Codex CLI and Gemini CLI (test/conformance/offline_test.go).
DEBIAN_PACKAGES=(runc iptables nftables conntrack ipset iproute2 strace)

step() { printf '[node-build %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

if [[ "${1:-}" == "--print" ]]; then
  printf 'K8S_BIN=%s\nCONTAINERD_DIR=%s\nCNI_DIR=%s\nKUBE_ROUTER_DIR=%s\n' \
    "${ROOT}/bin/k8s/${K8S_VERSION}" "${CONTAINERD_DIR}" "${CNI_DIR}" "${KUBE_ROUTER_DIR}"
  exit 0
fi

# heartbeat LABEL PID: prints elapsed time every 30 s while PID runs.
heartbeat() {
  local label="$1" pid="$2" start=$SECONDS
  while kill -0 "${pid}" 2>/dev/null; do
    sleep 30
    kill -0 "${pid}" 2>/dev/null && step "still building ${label} ($(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s)"
  done
}

# go_install DIR LABEL TAGS PKG...: go installs PKG... into DIR unless every binary is there.
go_install() {
  local dir="$1" label="$2" tags="$3"; shift 3
  local pkg missing=false
  for pkg in "$@"; do [[ -x "${dir}/$(basename "${pkg%@*}")" ]] || missing=true; done
  if ! ${missing}; then step "${label}: present in ${dir}"; return; fi
  step "building ${label} (${*##*/})"
  local tmp="${dir}.tmp" start=$SECONDS rc=0
  rm -rf "${tmp}" && mkdir -p "${tmp}"
  GOBIN="${tmp}" CGO_ENABLED=0 GOFLAGS=-trimpath go install -tags "${tags}" -ldflags "-s -w" "$@" &
  local pid=$!
  heartbeat "${label}" "${pid}" &
  local hb=$!
  wait "${pid}" || rc=$?
  kill "${hb}" 2>/dev/null || true
  wait "${hb}" 2>/dev/null || true
  [[ ${rc} -eq 0 ]] || { echo "${label} build failed (exit ${rc})" >&2; exit "${rc}"; }
  rm -rf "${dir}" && mv "${tmp}" "${dir}"
  step "${label}: built in $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s"
}

debian_packages() {
  local missing=() p
  for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f '${Status}' "${p}" 2>/dev/null | grep -q 'install ok installed' || missing+=("${p}")
  done
  [[ ${#missing[@]} -gt 0 ]] || { step "Debian packages present: ${DEBIAN_PACKAGES[*]}"; return; }
  step "installing Debian packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# busybox: the static busybox of Debian's busybox-static, for the testbed image's shell. It is
# downloaded and unpacked into bin/node, not installed on the machine.
busybox() {
  [[ -x "${NODE_BIN}/busybox" ]] && { step "busybox: present"; return; }
  step "downloading Debian's busybox-static for the testbed image"
  local tmp
  tmp="$(mktemp -d)"
  (cd "${tmp}" && apt-get download -qq busybox-static 2>/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get download -qq busybox-static; })
  dpkg-deb -x "${tmp}"/busybox-static_*.deb "${tmp}/root"
  mkdir -p "${NODE_BIN}"
  install -m 0755 "${tmp}/root/bin/busybox" "${NODE_BIN}/busybox"
  rm -rf "${tmp}"
}

main() {
  local start=$SECONDS
  debian_packages
  busybox
  K8S_VERSION="${K8S_VERSION}" "${ROOT}/hack/build-control-plane.sh" kube-apiserver kube-controller-manager etcd kube-scheduler kubelet kube-proxy
  go_install "${CNI_DIR}" "CNI plugins ${CNI_PLUGINS_VERSION}" "" \
    "github.com/containernetworking/plugins/plugins/main/bridge@${CNI_PLUGINS_VERSION}" \
    "github.com/containernetworking/plugins/plugins/ipam/host-local@${CNI_PLUGINS_VERSION}" \
    "github.com/containernetworking/plugins/plugins/main/loopback@${CNI_PLUGINS_VERSION}" \
    "github.com/containernetworking/plugins/plugins/meta/portmap@${CNI_PLUGINS_VERSION}"
  go_install "${CONTAINERD_DIR}" "containerd ${CONTAINERD_VERSION}" "no_btrfs no_devmapper no_zfs" \
    "github.com/containerd/containerd/v2/cmd/containerd@${CONTAINERD_VERSION}" \
    "github.com/containerd/containerd/v2/cmd/ctr@${CONTAINERD_VERSION}" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@${CONTAINERD_VERSION}"
  go_install "${KUBE_ROUTER_DIR}" "kube-router ${KUBE_ROUTER_VERSION}" "" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@${KUBE_ROUTER_VERSION}"
  step "node components ready in $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s"
}

main "$@"
