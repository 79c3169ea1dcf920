#!/usr/bin/env bash
# sync-chart.sh: regenerates the Helm chart's CRD templates (charts/gate-operator/templates/crds/)
# and its manager ClusterRole (charts/gate-operator/templates/clusterrole.yaml) from the
# controller-gen output in config/. Run it (`make chart-sync`) after `make manifests`; never
# edit the generated chart files by hand. Extra arguments go to hack/sync-chart (-config, -chart).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
go run ./hack/sync-chart -config config -chart charts/gate-operator "$@"
echo "[chart-sync] charts/gate-operator/templates/crds/ and templates/clusterrole.yaml regenerated from config/"
