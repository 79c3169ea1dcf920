#!/usr/bin/env bash
# Scale benchmark of the HarnessAgentPolicy controller on a throwaway local control plane:
# time to Ready for 500 policies, API writes after convergence, and manager RSS with 10,000
# unrelated ConfigMaps versus none. Flags go to hack/bench-reconcile (see its -help).
# Takes about 5 minutes after the control plane is built.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export LOCAL_CLUSTER_DIR="${PWD}/tmp/bench-cluster" ETCD_PORT=23890 APISERVER_PORT=16543
trap 'hack/local-cluster.sh stop >/dev/null' EXIT
CGO_ENABLED=0 go build -trimpath -o bin/manager ./cmd/manager
hack/local-cluster.sh start
export KUBECONFIG="${LOCAL_CLUSTER_DIR}/kubeconfig"
kubectl apply --server-side -f config/crd/bases/ >/dev/null
kubectl wait --for condition=Established crd --all --timeout=60s >/dev/null
go run ./hack/bench-reconcile "$@"
