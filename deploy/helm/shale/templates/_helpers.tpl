{{/* The chart's name, or nameOverride. */}}
{{- define "shale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name, used for every object (DNS-safe, 63 characters at most,
and short enough that "<fullname>-controller-NN" still fits a pod hostname). */}}
{{- define "shale.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "shale.controllerName" -}}
{{- printf "%s-controller" (include "shale.fullname" .) -}}
{{- end -}}

{{- define "shale.headless" -}}
{{- printf "%s-headless" (include "shale.fullname" .) -}}
{{- end -}}

{{- define "shale.controllerHeadless" -}}
{{- printf "%s-controller-headless" (include "shale.fullname" .) -}}
{{- end -}}

{{- define "shale.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "shale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels; component is "broker" or "controller". */}}
{{- define "shale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shale.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "shale.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "shale.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "shale.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "shale.dedicated" -}}
{{- if eq .Values.controller.mode "dedicated" -}}true{{- end -}}
{{- end -}}

{{/* Controller node ids: ordinals in combined mode, 1000 + ordinal in dedicated mode. */}}
{{- define "shale.controllerIDBase" -}}
{{- if include "shale.dedicated" . -}}1000{{- else -}}0{{- end -}}
{{- end -}}

{{/* controller.quorum.voters: id@<pod>.<headless>.<namespace>.svc.<domain>:<port>,... */}}
{{- define "shale.voters" -}}
{{- $voters := list -}}
{{- $base := int (include "shale.controllerIDBase" .) -}}
{{- $domain := printf "%s.svc.%s" .Release.Namespace .Values.clusterDomain -}}
{{- if include "shale.dedicated" . -}}
{{- range $i := until (int .Values.controller.replicas) -}}
{{- $voters = append $voters (printf "%d@%s-%d.%s.%s:%d" (add $base $i) (include "shale.controllerName" $) $i (include "shale.controllerHeadless" $) $domain (int $.Values.ports.controller)) -}}
{{- end -}}
{{- else -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $voters = append $voters (printf "%d@%s-%d.%s.%s:%d" $i (include "shale.fullname" $) $i (include "shale.headless" $) $domain (int $.Values.ports.controller)) -}}
{{- end -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}

{{/* The address broker pod $i advertises on its PLAINTEXT listener: to clients inside the
cluster and to the other brokers, which replicate over it. */}}
{{- define "shale.advertised" -}}
{{- $root := .root -}}
{{- printf "%s-%d.%s.%s.svc.%s:%d" (include "shale.fullname" $root) .i (include "shale.headless" $root) $root.Release.Namespace $root.Values.clusterDomain (int $root.Values.ports.kafka) -}}
{{- end -}}

{{/* The address broker pod $i advertises on its EXTERNAL listener (external.enabled). */}}
{{- define "shale.advertisedExternal" -}}
{{- $root := .root -}}
{{- $i := .i -}}
{{- if eq $root.Values.external.type "NodePort" -}}
{{- printf "%s:%d" $root.Values.external.nodePort.host (add (int $root.Values.external.nodePort.basePort) $i) -}}
{{- else -}}
{{- printf "%s:%d" (index $root.Values.external.loadBalancer.hosts $i) (int $root.Values.ports.kafka) -}}
{{- end -}}
{{- end -}}

{{/* Settings every node shares, then broker.config (which wins: a later key replaces an
earlier one in a properties file). */}}
{{- define "shale.commonProperties" -}}
controller.quorum.voters={{ include "shale.voters" . }}
log.dirs=/var/lib/shale/data
http.listener=0.0.0.0:{{ .Values.ports.http }}
log.level={{ .Values.broker.logLevel }}
num.partitions={{ .Values.broker.numPartitions }}
default.replication.factor={{ min (int .Values.broker.defaultReplicationFactor) (int .Values.replicas) }}
min.insync.replicas={{ min (int .Values.broker.minInsyncReplicas) (int .Values.replicas) }}
auto.create.topics.enable={{ .Values.broker.autoCreateTopics }}
{{- range $k, $v := .Values.broker.config }}
{{ $k }}={{ $v }}
{{- end }}
{{- end -}}

{{/* Checks that refuse values which would render a broken or unsafe cluster. */}}
{{- define "shale.validate" -}}
{{- if and .Values.external.enabled (eq .Values.external.type "NodePort") (not .Values.external.nodePort.host) -}}
{{- fail "external.type=NodePort needs external.nodePort.host: the node address or name clients reach" -}}
{{- end -}}
{{- if and .Values.external.enabled (eq .Values.external.type "LoadBalancer") (lt (len .Values.external.loadBalancer.hosts) (int .Values.replicas)) -}}
{{- fail (printf "external.type=LoadBalancer needs one entry in external.loadBalancer.hosts per broker (%d), got %d" (int .Values.replicas) (len .Values.external.loadBalancer.hosts)) -}}
{{- end -}}
{{- $current := lookup "apps/v1" "StatefulSet" .Release.Namespace (include "shale.fullname" .) -}}
{{- if $current -}}
{{- $was := int $current.spec.replicas -}}
{{- if and (lt (int .Values.replicas) $was) (not .Values.allowScaleDown) -}}
{{- fail (printf "\n\nREFUSING TO SCALE DOWN from %d to %d brokers: brokers %d..%d would be removed with every replica they hold.\nMove their partitions to brokers below %d first (`shale topic describe` must show no replica on them), then upgrade again with --set allowScaleDown=true.\n" $was (int .Values.replicas) (int .Values.replicas) (sub $was 1) (int .Values.replicas)) -}}
{{- end -}}
{{- if and (ne (int .Values.replicas) $was) (not (include "shale.dedicated" .)) -}}
{{- fail (printf "\n\nREFUSING TO CHANGE replicas from %d to %d in combined mode: every broker pod is a controller voter and the quorum is fixed at install. Use controller.mode=dedicated for a cluster whose brokers scale.\n" $was (int .Values.replicas)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
