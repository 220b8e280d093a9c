#!/bin/sh
# Runs a real Prometheus (no Docker) that scrapes otelcol-streamwatch.
#
# Prometheus does not expand environment variables in scrape targets, so this
# writes a copy of deploy/prometheus.yml with the targets taken from
# STREAMWATCH_PROMETHEUS (the collector's exporter address) and
# STREAMWATCH_TELEMETRY_HOST/PORT (its own metrics), the variables
# deploy/collector.yaml reads, and runs `prometheus` on it, with exemplar
# storage on so Grafana can link a histogram bucket to its trace. The
# alerting rules, alerts.yml, are copied beside the config, which loads them.
#
#   STREAMWATCH_PROMETHEUS  scrape target         (default 127.0.0.1:8889);
#                           none for collectors that only push by remote
#                           write (deploy/gateway.yaml): no exporter job, and
#                           the liveness rules ask for the own-metrics job alone
#   STREAMWATCH_TELEMETRY_HOST, STREAMWATCH_TELEMETRY_PORT
#                           the collector's own metrics (127.0.0.1, 8888)
#   PROMETHEUS_LISTEN       Prometheus's address  (default 127.0.0.1:9090)
#   PROMETHEUS_DATA         config copy and TSDB  (default ./_prometheus)
#   PROMETHEUS              the binary            (default prometheus)
#
# Extra arguments go to prometheus.
set -eu
target=${STREAMWATCH_PROMETHEUS:-127.0.0.1:8889}
host=${STREAMWATCH_TELEMETRY_HOST:-127.0.0.1}
case $host in
*:*) case $host in \[*) ;; *) host="[$host]" ;; esac ;; # an IPv6 address takes brackets in host:port
esac
self=$host:${STREAMWATCH_TELEMETRY_PORT:-8888}
# hostport NAME VALUE refuses a VALUE that is not host:port (a mistyped
# "none" among them).
hostport() {
	case $2 in
	*[!]A-Za-z0-9.:_[-]* | "" | :* | *:) ;;
	*:*) return ;;
	esac
	echo "prometheus.sh: $1 must be host:port, got \"$2\"" >&2
	exit 2
}
# fail says what went wrong and stops.
fail() {
	echo "prometheus.sh: $1" >&2
	exit 2
}
if [ "$target" != none ]; then
	hostport STREAMWATCH_PROMETHEUS "$target"
fi
hostport STREAMWATCH_TELEMETRY_HOST:PORT "$self"
data=${PROMETHEUS_DATA:-./_prometheus}
mkdir -p "$data"
if [ "$target" = none ]; then
	# A gateway serves no exporter to scrape: without the exporter's job,
	# StreamwatchCollectorDown watches the own-metrics job alone, and
	# StreamwatchCollectorMissing must not wait for a job that never comes.
	# The exporter's job alone goes: from its job_name line (the name
	# quoted or not) to the next job or top-level key.
	awk '/^  - job_name:/ { n = $3; gsub(/["\047]/, "", n); skip = (n == "otelcol-streamwatch") } /^[^ #]/ { skip = 0 } !skip' \
		"$(dirname "$0")/prometheus.yml" | sed -e "s/\"127\.0\.0\.1:8888\"/\"$self\"/" >"$data/prometheus.yml"
	sed -e 's/absent(up{job="otelcol-streamwatch"}) or //' "$(dirname "$0")/alerts.yml" >"$data/alerts.yml"
	# An edit of either file that these patterns miss must not start a
	# Prometheus that alerts on a job the gateway never has.
	! grep -Eq 'job_name:.*otelcol-streamwatch([^-]|$)' "$data/prometheus.yml" ||
		fail "could not remove the exporter's job from $data/prometheus.yml"
	! grep -q 'absent(up{job="otelcol-streamwatch"})' "$data/alerts.yml" ||
		fail "could not remove the exporter's job from StreamwatchCollectorMissing in $data/alerts.yml"
else
	sed -e "s/\"127\.0\.0\.1:8889\"/\"$target\"/" -e "s/\"127\.0\.0\.1:8888\"/\"$self\"/" \
		"$(dirname "$0")/prometheus.yml" >"$data/prometheus.yml"
	cp "$(dirname "$0")/alerts.yml" "$data/alerts.yml"
fi
exec "${PROMETHEUS:-prometheus}" \
	--config.file="$data/prometheus.yml" \
	--storage.tsdb.path="$data/data" \
	--web.listen-address="${PROMETHEUS_LISTEN:-127.0.0.1:9090}" \
	--enable-feature=exemplar-storage \
	"$@"
