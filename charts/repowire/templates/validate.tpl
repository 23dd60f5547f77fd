{{/* Checks across values that the schema cannot express; rendering fails with the reason. */}}
{{- define "repowire.validate" -}}
{{- $r := .Values.relay -}}
{{- if and (gt (int $r.replicaCount) 1) (not $r.database.secretName) -}}
{{- fail "relay.replicaCount > 1 needs Postgres (relay.database.secretName): embedded storage is one pod" -}}
{{- end -}}
{{- if and (gt (int $r.replicaCount) 1) (not $r.redis.secretName) -}}
{{- fail "relay.replicaCount > 1 needs Redis (relay.redis.secretName) for presence and cross-pod delivery" -}}
{{- end -}}
{{- if and $r.database.secretName (not $r.jwtSecret.secretName) -}}
{{- fail "relay.database needs relay.jwtSecret (every pod must verify the same tokens)" -}}
{{- end -}}
{{- $drain := int (include "repowire.relay.drainSecs" .) -}}
{{- if le (int $r.terminationGracePeriodSeconds) (add $drain (int $r.preStopSleepSecs)) -}}
{{- fail (printf "relay.terminationGracePeriodSeconds (%d) must exceed preStopSleepSecs + drainTimeoutSecs (%d)" (int $r.terminationGracePeriodSeconds) (add $drain (int $r.preStopSleepSecs))) -}}
{{- end -}}
{{- if and .Values.ingress.enabled (le (int .Values.ingress.timeoutSecs) (int ($r.settings.pingIntervalSecs | default 20))) -}}
{{- fail (printf "ingress.timeoutSecs (%d) must exceed the relay's ping interval (%d s), or the ingress closes idle WebSockets" (int .Values.ingress.timeoutSecs) (int ($r.settings.pingIntervalSecs | default 20))) -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (not (and $r.database.secretName $r.redis.secretName)) -}}
{{- fail "autoscaling needs Postgres and Redis (relay.database, relay.redis): embedded storage is one pod" -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (not (dig "requests" "cpu" "" $r.resources)) -}}
{{- fail "autoscaling needs relay.resources.requests.cpu: the autoscaler measures CPU use against the request, and without one it cannot scale" -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) -}}
{{- fail "autoscaling.minReplicas exceeds maxReplicas" -}}
{{- end -}}
{{- if and .Values.helmTest.enabled (not .Values.helmTest.apiKey.secretName) -}}
{{- fail "helmTest.enabled needs helmTest.apiKey.secretName (an API key to test with)" -}}
{{- end -}}
{{- if and .Values.operator.enabled (not .Values.operator.adminToken.secretName) -}}
{{- fail "operator.enabled needs operator.adminToken.secretName (an admin token with admin:read and admin:write)" -}}
{{- end -}}
{{- end -}}
