{{- define "gpunode.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpunode.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "gpunode.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "gpunode.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpunode.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpunode.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpunode.labels" -}}
{{ include "gpunode.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gpunode.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpunode.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gpunode.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* The host root every command reads, as mounted in the containers. */}}
{{- define "gpunode.hostRoot" -}}
{{- if .Values.simulate.enabled -}}{{ .Values.simulate.hostDir }}{{- else -}}/host{{- end -}}
{{- end -}}

{{/* gpunode's global flags (before the subcommand). */}}
{{- define "gpunode.globalArgs" -}}
- --host-root
- {{ include "gpunode.hostRoot" . | quote }}
{{- if .Values.simulate.enabled }}
- --nvml-library
- /usr/lib/gpunode/libgpunode-simnvml.so
- --cuda-library
- /usr/lib/gpunode/libgpunode-simnvml.so
{{- end }}
{{- end -}}

{{/* Environment every container gets. */}}
{{- define "gpunode.env" -}}
{{- if .Values.simulate.enabled }}
# The profile as the init container wrote it into the simulated root: edit it there and the
# simulated NVML follows (a GPU made `lost: true`, an XID event), as a real GPU would change.
- name: GPUNODE_SIM_PROFILE
  value: {{ printf "%s/profile.yaml" .Values.simulate.hostDir | quote }}
{{- end }}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- end -}}

{{/* The host root mount every container gets: the host read-only at /host, or the simulated root. */}}
{{- define "gpunode.hostRootMount" -}}
{{- if .Values.simulate.enabled }}
- name: sim-root
  mountPath: {{ .Values.simulate.hostDir }}
  readOnly: true
{{- else }}
- name: host-root
  mountPath: /host
  readOnly: true
  mountPropagation: HostToContainer
{{- end }}
{{- end -}}

{{/* securityContext of the node services. */}}
{{- define "gpunode.securityContext" -}}
{{- if .Values.simulate.enabled }}
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
{{- else if .Values.privileged }}
privileged: true
{{- else }}
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
{{- end }}
{{- end -}}

{{/* The host directory of the engine config `runtime configure` edits. */}}
{{- define "gpunode.runtimeConfigDir" -}}
{{- if .Values.runtimeConfigure.config -}}
{{- dir .Values.runtimeConfigure.config -}}
{{- else if eq .Values.runtimeConfigure.runtime "docker" -}}
/etc/docker
{{- else if eq .Values.runtimeConfigure.runtime "crio" -}}
/etc/crio/crio.conf.d
{{- else -}}
/etc/containerd
{{- end -}}
{{- end -}}
