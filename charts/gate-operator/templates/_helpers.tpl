{{/* The chart name, or nameOverride. */}}
{{- define "gate-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's resources: fullnameOverride, else "<release>-<chart name>",
else the release name alone when it already contains the chart name. 55 characters at most,
so "<fullname>-manager" and "<fullname>-leader-election" stay within 63.
*/}}
{{- define "gate-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The helm.sh/chart label value. */}}
{{- define "gate-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels naming the release's resources. */}}
{{- define "gate-operator.instanceLabels" -}}
app.kubernetes.io/name: {{ include "gate-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every resource of the release (each adds its app.kubernetes.io/component, if any). */}}
{{- define "gate-operator.labels" -}}
helm.sh/chart: {{ include "gate-operator.chart" . }}
{{ include "gate-operator.instanceLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gate-operator
{{- end }}

{{/* The labels that select the manager pods; never change them, a Deployment's selector is immutable. */}}
{{- define "gate-operator.selectorLabels" -}}
{{ include "gate-operator.instanceLabels" . }}
app.kubernetes.io/component: manager
{{- end }}

{{/* The manager's ServiceAccount. */}}
{{- define "gate-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gate-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* An image reference: <repository>@<digest> when a digest is set (the tag is then only a
label for people), otherwise <repository>:<tag>, the tag defaulting to the chart's appVersion. */}}
{{- define "gate-operator.imageRef" -}}
{{- $image := index . 0 }}{{- $chart := index . 1 }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default $chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/* The manager image. */}}
{{- define "gate-operator.image" -}}
{{- include "gate-operator.imageRef" (list .Values.image .Chart) }}
{{- end }}

{{/* The confirmer image, passed to the manager as --confirmer-image and --gate-hook-image. */}}
{{- define "gate-operator.confirmerImage" -}}
{{- include "gate-operator.imageRef" (list .Values.confirmerImage .Chart) }}
{{- end }}

{{/* Whether the manager elects a leader: always with more than one replica. */}}
{{- define "gate-operator.leaderElect" -}}
{{- if or (gt (int .Values.replicas) 1) .Values.leaderElection.enabled }}true{{ end }}
{{- end }}

{{/* The webhooks' Service, and the Secret their serving certificate is kept in. */}}
{{- define "gate-operator.webhookService" -}}
{{ include "gate-operator.fullname" . }}-webhook
{{- end }}
{{- define "gate-operator.webhookSecret" -}}
{{ include "gate-operator.fullname" . }}-webhook-cert
{{- end }}

{{/*
The namespaces a webhook sees: with watchNamespaces only those (the manager reads policies
there alone); the pod webhook also never the release namespace or kube-system.
*/}}
{{- define "gate-operator.webhookNamespaceSelector" -}}
{{- $exprs := list }}
{{- with .Values.watchNamespaces }}
{{- $exprs = append $exprs (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" .) }}
{{- end }}
{{- if .pods }}
{{- $exprs = append $exprs (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (list .Release.Namespace "kube-system")) }}
{{- end }}
{{- if $exprs }}
namespaceSelector:
  matchExpressions:
    {{- toYaml $exprs | nindent 4 }}
{{- end }}
{{- end }}

{{/*
The namespaces the checks of governed pods see (the governed-pods webhook, the
ValidatingAdmissionPolicies of config/admission-policies), and the NetworkPolicy webhook that
keeps tenants within the egress ceilings: every one but the release namespace and
admission.excludedNamespaces. The body of a namespaceSelector.
*/}}
{{- define "gate-operator.governedNamespaceSelector" -}}
matchExpressions:
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
    {{- toYaml (prepend .Values.admission.excludedNamespaces .Release.Namespace | uniq) | nindent 4 }}
{{- end }}

{{/* The egress canary's Service, which every injected egress-wait dials. */}}
{{- define "gate-operator.egressCanaryService" -}}
{{ include "gate-operator.fullname" . }}-egress-canary
{{- end }}
