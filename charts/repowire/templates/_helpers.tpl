{{/* Names and labels. */}}
{{- define "repowire.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "repowire.relay.name" -}}{{ include "repowire.fullname" . | trunc 57 | trimSuffix "-" }}-relay{{- end -}}
{{- define "repowire.operator.name" -}}{{ include "repowire.fullname" . | trunc 54 | trimSuffix "-" }}-operator{{- end -}}

{{- define "repowire.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "repowire.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "repowire.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
Every relay setting in `relay.settings` and the environment variable it becomes. One table:
scripts/test renders every setting and compares the names with `repowire-relay --help`.
*/}}
{{- define "repowire.relay.settingEnv" -}}
dbPool: REPOWIRE_DB_POOL
keyCheckSecs: REPOWIRE_KEY_CHECK_SECS
keyReplayWindowSecs: REPOWIRE_KEY_REPLAY_WINDOW_SECS
tenantRetentionDays: REPOWIRE_TENANT_RETENTION_DAYS
limitsRefreshMs: REPOWIRE_LIMITS_REFRESH_MS
rateBurstSecs: REPOWIRE_RATE_BURST_SECS
usageFlushMs: REPOWIRE_USAGE_FLUSH_MS
httpRequestsPerMinute: REPOWIRE_HTTP_REQUESTS_PER_MINUTE
httpBurst: REPOWIRE_HTTP_BURST
failedAuthPerMinute: REPOWIRE_FAILED_AUTH_PER_MINUTE
failedAuthBurst: REPOWIRE_FAILED_AUTH_BURST
trustedProxies: REPOWIRE_TRUSTED_PROXIES
tokenTtlSecs: REPOWIRE_TOKEN_TTL_SECS
dashboardSessionSecs: REPOWIRE_DASHBOARD_SESSION_SECS
eventLogLen: REPOWIRE_EVENT_LOG_LEN
signup: REPOWIRE_SIGNUP
signupPlan: REPOWIRE_SIGNUP_PLAN
signupsPerHour: REPOWIRE_SIGNUPS_PER_HOUR
oidcIssuer: REPOWIRE_OIDC_ISSUER
oidcClientId: REPOWIRE_OIDC_CLIENT_ID
oidcRedirectUrl: REPOWIRE_OIDC_REDIRECT_URL
oidcName: REPOWIRE_OIDC_NAME
operatorStaff: REPOWIRE_OPERATOR_STAFF
inboxCap: REPOWIRE_INBOX_CAP
conversationParticipants: REPOWIRE_CONVERSATION_PARTICIPANTS
conversationLoopTurns: REPOWIRE_CONVERSATION_LOOP_TURNS
conversationLoopBytes: REPOWIRE_CONVERSATION_LOOP_BYTES
conversationTurnsPerMinute: REPOWIRE_CONVERSATION_TURNS_PER_MINUTE
conversationIdleSecs: REPOWIRE_CONVERSATION_IDLE_SECS
messageTtlSecs: REPOWIRE_MESSAGE_TTL_SECS
descriptionTtlSecs: REPOWIRE_DESCRIPTION_TTL_SECS
redisPrefix: REPOWIRE_REDIS_PREFIX
presenceTtlSecs: REPOWIRE_PRESENCE_TTL_SECS
drainTimeoutSecs: REPOWIRE_DRAIN_TIMEOUT_SECS
maxConnections: REPOWIRE_MAX_CONNECTIONS
outboundQueue: REPOWIRE_OUTBOUND_QUEUE
outboundQueueBytes: REPOWIRE_OUTBOUND_QUEUE_BYTES
outboundBudgetBytes: REPOWIRE_OUTBOUND_BUDGET_BYTES
writeTimeoutSecs: REPOWIRE_WRITE_TIMEOUT_SECS
forgetOfflinePeersAfterSecs: REPOWIRE_FORGET_OFFLINE_PEERS_AFTER_SECS
headerTimeoutSecs: REPOWIRE_HEADER_TIMEOUT_SECS
bodyTimeoutSecs: REPOWIRE_BODY_TIMEOUT_SECS
maxPendingConnections: REPOWIRE_MAX_PENDING_CONNECTIONS
sendRate: REPOWIRE_SEND_RATE
sendBurst: REPOWIRE_SEND_BURST
inflightWrites: REPOWIRE_INFLIGHT_WRITES
pingIntervalSecs: REPOWIRE_PING_INTERVAL_SECS
idleTimeoutSecs: REPOWIRE_IDLE_TIMEOUT_SECS
helloTimeoutSecs: REPOWIRE_HELLO_TIMEOUT_SECS
sweepIntervalSecs: REPOWIRE_SWEEP_INTERVAL_SECS
questionSweepMs: REPOWIRE_QUESTION_SWEEP_MS
writeBatch: REPOWIRE_WRITE_BATCH
otlpEndpoint: OTEL_EXPORTER_OTLP_ENDPOINT
metricsAuth: REPOWIRE_METRICS_AUTH
logFormat: REPOWIRE_LOG_FORMAT
{{- end -}}

{{/*
Operator settings (values key under `operator` -> environment variable of `repowire-operator run
--help`), like the relay's table: a key set to null keeps the binary's default. scripts/check-chart
checks the names against --help and the defaults values.yaml shows against the binary's.
*/}}
{{- define "repowire.operator.settingEnv" -}}
leaseName: REPOWIRE_OPERATOR_LEASE_NAME
leaseSecs: REPOWIRE_OPERATOR_LEASE_SECS
resyncSecs: REPOWIRE_OPERATOR_RESYNC_SECS
usageIntervalSecs: REPOWIRE_OPERATOR_USAGE_INTERVAL_SECS
deletionTimeoutSecs: REPOWIRE_OPERATOR_DELETION_TIMEOUT_SECS
relayTimeoutSecs: REPOWIRE_OPERATOR_RELAY_TIMEOUT_SECS
{{- end -}}

{{/* A value from an existing Secret. */}}
{{- define "repowire.secretEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ .ref.name | quote }}
      key: {{ .ref.key | quote }}
{{- end -}}

{{/* Whether the relay runs on Postgres (else embedded SQLite, one pod). */}}
{{- define "repowire.relay.clustered" -}}
{{- if .Values.relay.database.secretName -}}true{{- end -}}
{{- end -}}

{{/* The drain timeout the relay will use (its default when unset). */}}
{{- define "repowire.relay.drainSecs" -}}
{{- .Values.relay.settings.drainTimeoutSecs | default 10 -}}
{{- end -}}

{{- define "repowire.operator.serviceAccount" -}}
{{- .Values.operator.serviceAccount.name | default (include "repowire.operator.name" .) -}}
{{- end -}}

{{/*
A setting as an environment variable's value. Helm reads numbers from values files as float64
and would print 2592000 as 2.592e+06, which no binary parses: whole numbers are printed whole.
*/}}
{{- define "repowire.envValue" -}}
{{- if kindIs "float64" . -}}{{ int64 . | toString | quote }}{{- else -}}{{ toString . | quote }}{{- end -}}
{{- end -}}

{{/* The relay Service's URL inside the cluster. */}}
{{- define "repowire.relay.url" -}}
{{- printf "%s://%s:%v" (ternary "https" "http" (not (empty .Values.relay.tls.secretName))) (include "repowire.relay.name" .) .Values.relay.service.port -}}
{{- end -}}

{{/* The relay paths the Ingress and HTTPRoute route (a YAML list of {path, type}): the client
API and WebSocket, the liveness check, the admin API only with ingress.exposeAdmin, the web
dashboard only with ingress.exposeDashboard. */}}
{{- define "repowire.relay.publicPaths" -}}
- {path: /v1, type: Prefix}
- {path: /healthz, type: Exact}
{{- if .Values.ingress.exposeAdmin }}
- {path: /admin/v1, type: Prefix}
{{- end }}
{{- if .Values.ingress.exposeDashboard }}
- {path: /dashboard, type: Prefix}
{{- end }}
{{- end -}}
