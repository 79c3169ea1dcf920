#!/usr/bin/env bash
# The human lane under load: -sessions Managed Agents sessions (default 200) each pause on
# -calls calls (default 5) that the policy sends to a human, on the in-process Sessions API
# fake (HTTP/2 over TLS); -replicas confirmers (default 2) share the sessions and create one
# ToolApproval per call on a throwaway local control plane (etcd and kube-apiserver,
# hack/local-cluster.sh start, with the ToolApproval CRD); a script approves them all in bulk
# through the status subresource. Reports whether every call was confirmed exactly once, and
# the time from approval write to confirmation (p50, p99, max). The admission webhook does not
# run here: the script writes the decider it would record. Flags go to hack/bench-approvals
# (see its -help). The control plane uses $LOCAL_CLUSTER_DIR (default tmp/bench-approvals-cluster),
# $ETCD_PORT (24790) and $APISERVER_PORT (17443), and is removed at the end unless it was
# already running. About a minute once the control plane is built.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export LOCAL_CLUSTER_DIR="${LOCAL_CLUSTER_DIR:-${PWD}/tmp/bench-approvals-cluster}"
export ETCD_PORT="${ETCD_PORT:-24790}" APISERVER_PORT="${APISERVER_PORT:-17443}"
kubeconfig="${LOCAL_CLUSTER_DIR}/kubeconfig"

if [[ -f "${LOCAL_CLUSTER_DIR}/kube-apiserver.pid" ]] && kill -0 "$(cat "${LOCAL_CLUSTER_DIR}/kube-apiserver.pid")" 2>/dev/null; then
	echo "using the control plane already running in ${LOCAL_CLUSTER_DIR}"
else
	hack/local-cluster.sh start
	trap 'hack/local-cluster.sh stop' EXIT
fi
kubectl --kubeconfig "${kubeconfig}" apply --server-side -f config/crd/bases/gate.intutic.io_toolapprovals.yaml
kubectl --kubeconfig "${kubeconfig}" wait --for=condition=Established crd/toolapprovals.gate.intutic.io --timeout=60s

mkdir -p tmp/bench-approvals
CGO_ENABLED=0 go build -trimpath -o tmp/bench-approvals/confirmer ./cmd/confirmer
go run ./hack/bench-approvals -confirmer tmp/bench-approvals/confirmer -kubeconfig "${kubeconfig}" "$@"
