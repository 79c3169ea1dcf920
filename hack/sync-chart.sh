#!/usr/bin/env bash
# sync-chart.sh: regenerates the Helm chart's CRD templates (charts/gate-operator/templates/crds/),
# its manager and approver ClusterRoles (templates/clusterrole.yaml, templates/approver-rbac.yaml)
# and its webhook configurations (templates/webhook-configurations.yaml) from config/. Run it
# (`make chart-sync`) after `make manifests` or an edit of config/rbac or config/webhook; never
# edit the generated chart files by hand. Extra arguments go to hack/sync-chart (-config, -chart).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
go run ./hack/sync-chart -config config -chart charts/gate-operator "$@"
echo "[chart-sync] charts/gate-operator/templates/crds/, clusterrole.yaml, approver-rbac.yaml, webhook-configurations.yaml and admission-policies.yaml regenerated from config/"
