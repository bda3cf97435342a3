{{/* The chart's name, and the name of its objects. */}}
{{- define "sweepgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sweepgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The admin Service's name. */}}
{{- define "sweepgate.adminName" -}}
{{- printf "%s-admin" (include "sweepgate.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels that select the gateway pods. */}}
{{- define "sweepgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sweepgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sweepgate.labels" -}}
{{ include "sweepgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "sweepgate.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
Where the pod sees each file. Secrets are mounted as directories (never
subPath), so that a rotated Secret reaches the pod and a reload applies it.
*/}}
{{- define "sweepgate.paths" -}}
config: /etc/sweepgate/config.yaml
secrets: /etc/sweepgate/secrets
tls: /etc/sweepgate/tls
adminTLS: /etc/sweepgate/admin-tls
etcdTLS: /etc/sweepgate/etcd-tls
etcdPassword: /etc/sweepgate/etcd-password
backendCA: /etc/sweepgate/backend-ca
{{- end -}}

{{/*
config.yaml, built from the values: every key a setting of `sweepgate serve
--help`, every secret a file path, never a value.
*/}}
{{- define "sweepgate.config" -}}
{{- $p := include "sweepgate.paths" . | fromYaml -}}
{{- $v := .Values -}}
{{- if not $v.etcd.endpoints -}}
{{- fail "etcd.endpoints: the chart needs an external etcd cluster (an embedded etcd's data would not outlive its pod)" -}}
{{- end -}}
{{- if not $v.backend.endpoint -}}
{{- fail "backend.endpoint is required" -}}
{{- end -}}
{{- if not $v.s3.tls.secretName -}}
{{- fail "s3.tls.secretName: the S3 listener serves HTTPS with the certificate of this Secret" -}}
{{- end -}}
{{- if not $v.admin.tls.secretName -}}
{{- fail "admin.tls.secretName: the admin listener serves HTTPS with the certificate of this Secret" -}}
{{- end -}}
{{- $x := $v.extraConfig -}}
{{- $secretKeys := list (list "credentials" (hasKey $x "credentials")) (list "admin.token" (hasKey (default dict $x.admin) "token")) (list "backend.secret_key" (hasKey (default dict $x.backend) "secret_key")) (list "backend.access_key" (hasKey (default dict $x.backend) "access_key")) (list "backend.identities" (hasKey (default dict $x.backend) "identities")) -}}
{{- range $secretKeys -}}
{{- if index . 1 -}}
{{- fail (printf "extraConfig.%s: secrets are files from Secrets (values secrets, backend.identities), never in the ConfigMap" (index . 0)) -}}
{{- end -}}
{{- end -}}
{{- $admin := .Values.admin -}}
{{- $adminName := include "sweepgate.adminName" . -}}
{{- $hosts := list $adminName (printf "%s.%s" $adminName .Release.Namespace) (printf "%s.%s.svc" $adminName .Release.Namespace) -}}
{{- $backend := dict "endpoint" $v.backend.endpoint "region" $v.backend.region "secret_key_file" (printf "%s/%s" $p.secrets $v.secrets.keys.backendSecretKey) -}}
{{- if $v.backend.ca.secretName -}}
{{- $_ := set $backend "ca_file" (printf "%s/%s" $p.backendCA $v.backend.ca.key) -}}
{{- end -}}
{{- if $v.backend.identities -}}
{{- $ids := list -}}
{{- range $v.backend.identities -}}
{{- $ids = append $ids (dict "name" .name "access_key" .accessKey "secret_key_file" (printf "%s/identity-%s" $p.secrets .name)) -}}
{{- end -}}
{{- $_ := set $backend "identities" $ids -}}
{{- end -}}
{{- $etcd := dict "endpoints" $v.etcd.endpoints "prefix" $v.etcd.prefix -}}
{{- if $v.etcd.tls.secretName -}}
{{- if $v.etcd.tls.caKey -}}
{{- $_ := set $etcd "ca_file" (printf "%s/%s" $p.etcdTLS $v.etcd.tls.caKey) -}}
{{- end -}}
{{- if and $v.etcd.tls.certKey $v.etcd.tls.keyKey -}}
{{- $_ := set $etcd "cert_file" (printf "%s/%s" $p.etcdTLS $v.etcd.tls.certKey) -}}
{{- $_ := set $etcd "key_file" (printf "%s/%s" $p.etcdTLS $v.etcd.tls.keyKey) -}}
{{- end -}}
{{- end -}}
{{- if $v.etcd.auth.username -}}
{{- if not $v.etcd.auth.passwordSecret.name -}}
{{- fail "etcd.auth.passwordSecret.name: etcd.auth.username needs its password from a Secret" -}}
{{- end -}}
{{- $_ := set $etcd "username" $v.etcd.auth.username -}}
{{- $_ := set $etcd "password_file" (printf "%s/%s" $p.etcdPassword $v.etcd.auth.passwordSecret.key) -}}
{{- end -}}
{{- $reclaim := dict "enabled" $v.reclaim.enabled "dry_run" $v.reclaim.dryRun "interval" $v.reclaim.interval "election_ttl" $v.reclaim.electionTTL "backend_identity" $v.reclaim.backendIdentity -}}
{{- if $v.reclaim.buckets -}}
{{- $_ := set $reclaim "buckets" $v.reclaim.buckets -}}
{{- end -}}
{{- $cfg := dict
  "listen" (ternary (printf ":%d" (int $v.s3.plain.port)) "" $v.s3.plain.enabled)
  "tls_listen" (printf ":%d" (int $v.s3.port))
  "tls_cert_file" (printf "%s/tls.crt" $p.tls)
  "tls_key_file" (printf "%s/tls.key" $p.tls)
  "accept_backend_credentials" $v.acceptBackendCredentials
  "credentials_file" (printf "%s/%s" $p.secrets $v.secrets.keys.credentials)
  "backend" $backend
  "etcd" $etcd
  "admin" (dict "listen" (printf ":%d" (int $admin.port)) "hosts" (concat $hosts $admin.extraHosts) "token_file" (printf "%s/%s" $p.secrets $v.secrets.keys.adminToken) "tls_cert_file" (printf "%s/tls.crt" $p.adminTLS) "tls_key_file" (printf "%s/tls.key" $p.adminTLS))
  "reclaim" $reclaim
  "shutdown" (dict "drain_delay" $v.shutdown.drainDelay "timeout" $v.shutdown.timeout)
  "log" (dict "format" $v.log.format "level" $v.log.level)
-}}
{{- if $v.digests.preset -}}
{{- $_ := set $cfg "digests" (dict "preset" $v.digests.preset "preset_storage" $v.digests.presetStorage) -}}
{{- end -}}
{{- $extra := deepCopy $v.extraConfig -}}
{{- toYaml (mergeOverwrite $extra $cfg) -}}
{{- end -}}

{{/*
What the gateway and its configuration check share: the environment, the
security context and the mounts, so that the check sees what serve will.
The image sets SWEEPGATE_LISTEN and SWEEPGATE_ADMIN_LISTEN; they are
emptied here (an empty variable counts as unset), so that config.yaml
alone says where the listeners are, and plain HTTP stays off unless
s3.plain.enabled.
*/}}
{{- define "sweepgate.containerCommon" -}}
{{- $p := include "sweepgate.paths" . | fromYaml -}}
{{- $v := .Values -}}
env:
  - name: SWEEPGATE_LISTEN
    value: ""
  - name: SWEEPGATE_ADMIN_LISTEN
    value: ""
  - name: SWEEPGATE_BACKEND_ACCESS_KEY
    valueFrom:
      secretKeyRef: {name: {{ $v.secrets.name }}, key: {{ $v.secrets.keys.backendAccessKey }}}
securityContext:
  {{- toYaml $v.securityContext | nindent 2 }}
volumeMounts:
  - {name: config, mountPath: {{ $p.config }}, subPath: config.yaml, readOnly: true}
  - {name: secrets, mountPath: {{ $p.secrets }}, readOnly: true}
  - {name: tls, mountPath: {{ $p.tls }}, readOnly: true}
  - {name: admin-tls, mountPath: {{ $p.adminTLS }}, readOnly: true}
  {{- if $v.etcd.tls.secretName }}
  - {name: etcd-tls, mountPath: {{ $p.etcdTLS }}, readOnly: true}
  {{- end }}
  {{- if $v.etcd.auth.username }}
  - {name: etcd-password, mountPath: {{ $p.etcdPassword }}, readOnly: true}
  {{- end }}
  {{- if $v.backend.ca.secretName }}
  - {name: backend-ca, mountPath: {{ $p.backendCA }}, readOnly: true}
  {{- end }}
  - {name: data, mountPath: /data}
{{- end -}}
