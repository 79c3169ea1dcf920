#!/usr/bin/env bash
# Scale benchmark of the HarnessAgentPolicy controller on a throwaway local control plane
# (tmp/bench-cluster, ports 23890 and 16543), with issue 17's numbers by default: 10,000
# policies of 10 rules in 100 namespaces, half allowing CIDRs and hosts resolved through the
# DNS stand-in of hack/testbed. It reports the time until all are Ready, the manager's writes
# per second, its writes in 2 quiet minutes, its RSS (and with 10,000 unrelated ConfigMaps)
# and the top of its CPU profile. Flags go to hack/bench-reconcile (see its -help); for
# example -policies=500 -namespaces=10 -configmaps=0 -quiet=30s for a quick run.
# Takes about 10 minutes after the control plane is built.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export LOCAL_CLUSTER_DIR="${PWD}/tmp/bench-cluster" ETCD_PORT=23890 APISERVER_PORT=16543
trap 'hack/local-cluster.sh stop >/dev/null' EXIT
CGO_ENABLED=0 go build -trimpath -o bin/manager ./cmd/manager
go build -o bin/testbed ./hack/testbed
go build -o bin/bench-reconcile ./hack/bench-reconcile
hack/local-cluster.sh start
export KUBECONFIG="${LOCAL_CLUSTER_DIR}/kubeconfig"
kubectl apply --server-side -f config/crd/bases/ >/dev/null
kubectl wait --for condition=Established crd --all --timeout=60s >/dev/null
mkdir -p tmp
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
bin/bench-reconcile -cpuprofile tmp/bench-reconcile-cpu.pprof "$@"
if [[ -s tmp/bench-reconcile-cpu.pprof ]]; then
  echo "top of the manager's CPU profile (cumulative):"
  go tool pprof -top -cum -nodecount=40 bin/manager tmp/bench-reconcile-cpu.pprof 2>/dev/null | sed -n '1,50p'
fi
