#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and etcd from the Go module
# proxy into bin/k8s/<version>/, once. A binary that is present and reports the pinned version
# is never rebuilt. Uses only the Go toolchain.
#
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces the staging modules with
# ./staging paths), so the commands are built inside a throwaway wrapper module that requires
# k8s.io/kubernetes and replaces every staging module with its own release. etcd is built in
# the same module, so it gets the version kubernetes pins.
#
# The node's kubelet and kube-proxy come from the same module (hack/build-node.sh asks for them).
#
# Usage: hack/build-control-plane.sh [binary ...]   (default: kube-apiserver kube-controller-manager etcd)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/k8s/${K8S_VERSION}"
WRAPPER="${ROOT}/bin/k8s/.wrapper-${K8S_VERSION}"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"          # v1.37.2 -> v0.37.2
WRAPPER_COMMANDS="etcd kube-apiserver kube-controller-manager kube-proxy kube-scheduler kubelet"
MINOR="$(echo "${K8S_VERSION#v}" | cut -d. -f2)"

step() { printf '[control-plane %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# reports_version BIN: does BIN exist and report the pinned version?
reports_version() {
  local bin="$1" want
  [[ -x "${OUT}/${bin}" ]] || return 1
  case "${bin}" in
    etcd) want="etcd Version: ${ETCD_VERSION#v}" ;;
    *) want="Kubernetes ${K8S_VERSION}" ;;
  esac
  # The output is captured first: piped into `grep -q`, which exits at the first match, etcd's
  # four-line --version can die of SIGPIPE, and under pipefail a present etcd then looks wrong.
  local out
  out="$("${OUT}/${bin}" --version 2>/dev/null)" || return 1
  grep -qF "${want}" <<<"${out}"
}

# heartbeat LABEL PID: prints elapsed time every 30 s while PID runs, so a long build is visibly alive.
heartbeat() {
  local label="$1" pid="$2" start=$SECONDS
  while kill -0 "${pid}" 2>/dev/null; do
    sleep 30
    kill -0 "${pid}" 2>/dev/null && step "still building ${label} ($(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s)"
  done
}

write_wrapper() {
  local kmod
  step "fetching k8s.io/kubernetes@${K8S_VERSION} go.mod"
  kmod="$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
  ETCD_VERSION="$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2}' "${kmod}")"
  [[ -n "${ETCD_VERSION}" ]] || { echo "cannot find the etcd server version in ${kmod}" >&2; exit 1; }
  # The marker names the commands the wrapper was resolved for; a wrapper from before the node
  # commands were added is resolved again (go mod tidy only adds what the new imports need).
  if [[ -f "${WRAPPER}/go.sum" && "$(cat "${WRAPPER}/.complete" 2>/dev/null)" == "${WRAPPER_COMMANDS}" ]]; then
    return
  fi
  step "writing wrapper module (${STAGING_VERSION} for every staging module, etcd ${ETCD_VERSION})"
  rm -rf "${WRAPPER}"
  mkdir -p "${WRAPPER}"
  {
    echo "module gate-operator.local/k8s-wrapper"
    echo
    echo "go $(awk '$1 == "go" {print $2; exit}' "${kmod}")"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes ${K8S_VERSION}"
    echo "	go.etcd.io/etcd/server/v3 ${ETCD_VERSION}"
    echo ")"
    echo
    echo "replace ("
    awk '$2 == "=>" && $3 ~ /^\.\/staging\// {printf "\t%s => %s %s\n", $1, $1, v}' v="${STAGING_VERSION}" "${kmod}"
    echo ")"
  } > "${WRAPPER}/go.mod"
  cat > "${WRAPPER}/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
  step "resolving wrapper module dependencies (go mod tidy; downloads on the first run)"
  (cd "${WRAPPER}" && go mod tidy)
  echo "${WRAPPER_COMMANDS}" > "${WRAPPER}/.complete"
}

main() {
  local want=("$@")
  [[ ${#want[@]} -gt 0 ]] || want=(kube-apiserver kube-controller-manager etcd)
  mkdir -p "${OUT}"
  write_wrapper

  local missing=() b
  for b in "${want[@]}"; do
    if reports_version "${b}"; then
      step "${b}: present, $( "${OUT}/${b}" --version 2>/dev/null | head -1)"
    else
      missing+=("${b}")
    fi
  done
  [[ ${#missing[@]} -gt 0 ]] || { step "all present in ${OUT}"; return; }

  local pkgs=()
  for b in "${missing[@]}"; do
    case "${b}" in
      etcd) pkgs+=("go.etcd.io/etcd/server/v3") ;;
      kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubelet) pkgs+=("k8s.io/kubernetes/cmd/${b}") ;;
      *) echo "unknown binary ${b}" >&2; exit 2 ;;
    esac
  done

  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${MINOR} -X k8s.io/component-base/version.gitTreeState=clean"
  step "building ${missing[*]} (a cold kube-apiserver build takes 5 to 10 minutes on 2 cores)"
  local tmp="${OUT}/.tmp"
  rm -rf "${tmp}" && mkdir -p "${tmp}"
  local start=$SECONDS
  (cd "${WRAPPER}" && CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${tmp}/" "${pkgs[@]}") &
  local pid=$!
  heartbeat "${missing[*]}" "${pid}" &
  local hb=$!
  local rc=0
  wait "${pid}" || rc=$?
  kill "${hb}" 2>/dev/null || true
  wait "${hb}" 2>/dev/null || true
  [[ ${rc} -eq 0 ]] || { echo "control-plane build failed (exit ${rc})" >&2; exit "${rc}"; }
  # go.etcd.io/etcd/server/v3 builds as "server" (the major-version suffix is dropped).
  if [[ -f "${tmp}/server" ]]; then mv "${tmp}/server" "${tmp}/etcd"; fi
  for b in "${missing[@]}"; do
    mv "${tmp}/${b}" "${OUT}/${b}"
    reports_version "${b}" || { echo "${b} does not report the pinned version" >&2; exit 1; }
    step "${b}: built, $("${OUT}/${b}" --version 2>/dev/null | head -1)"
  done
  rm -rf "${tmp}"
  step "done in $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s"
}

main "$@"
