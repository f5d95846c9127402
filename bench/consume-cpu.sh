#!/usr/bin/env bash
# Broker CPU per consumed GB in consume-1k's read-back, for one or more shale binaries run
# in turn (ROUNDS times each, interleaved, so that a noisy machine hurts them alike): a
# fresh `shale serve` per run, the preload, then the broker's CPU time (schedstat over
# its threads) from the start of the read-back to its end, divided by the bytes read.
#
# usage: bench/consume-cpu.sh [-d SECONDS] [-r ROUNDS] NAME=BINARY[@SERVE_FLAGS]...
#   e.g. bench/consume-cpu.sh -r 2 before=/tmp/shale-before after=bin/shale \
#          writev=bin/shale@--fetch.sendfile.enable=false
# SERVE_FLAGS (space-separated) go to that binary's `shale serve` only. -d is the
# preload's seconds (default 8), -r how many times each binary runs (default 2).
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

dur=8
rounds=2
while getopts "d:r:h" opt; do
	case $opt in
	d) dur=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) sed -n '2,10p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { sed -n '2,10p' "$0"; exit 2; }
out=$(mktemp -d /tmp/shale-consume-cpu-XXXXXX)

broker_pid="" data=""
cleanup() {
	if [ -n "$broker_pid" ]; then kill -TERM "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; fi
	[ -z "$data" ] || rm -rf "$data"
	broker_pid="" data=""
}
trap 'cleanup; rm -rf "$out"' EXIT

cpu_ms() {
	schedstat "$broker_pid" | cut -d' ' -f1
}

run() {
	local name=$1 bin=$2; shift 2
	read -r p0 p1 p2 < <(free_ports 3)
	data=$(mktemp -d /tmp/shale-consume-cpu-data-XXXXXX)
	local kafka=127.0.0.1:$p0 http=127.0.0.1:$p1
	"$bin" serve --log.dirs="$data" --listeners="PLAINTEXT://$kafka,CONTROLLER://127.0.0.1:$p2" \
		--schema.registry.listener= --rest.proxy.listener= --http.listener="$http" "$@" >"$out/broker.log" 2>&1 &
	broker_pid=$!
	wait_ready "$http" "$broker_pid" "$out/broker.log"
	"$bin" bench consume --preset consume-1k --bootstrap-server "$kafka" --duration "${dur}s" --json \
		>"$out/run.json" 2>"$out/run.progress" &
	local b=$!
	until grep -q '| consume' "$out/run.progress" 2>/dev/null; do
		kill -0 $b 2>/dev/null || break
		sleep 0.05
	done
	local c0 t0 c1 t1
	c0=$(cpu_ms) t0=$(date +%s.%N)
	# The read-back ends when the bench does; sample until then.
	c1=$c0
	while kill -0 $b 2>/dev/null; do
		c1=$(cpu_ms)
		sleep 0.05
	done
	t1=$(date +%s.%N)
	wait $b || true
	cleanup
	jq -r --arg name "$name" --argjson c "$((c1 - c0))" --arg t0 "$t0" --arg t1 "$t1" '
		[.roles[] | select(.role=="consume")][0] as $r
		| ($r.bytes // ($r.records * 1024)) as $bytes
		| "\($name)\t\($r.records_per_sec|floor) rec/s\t\($bytes/1e9*1000|floor/1000) GB read\tbroker CPU \($c) ms\t\(($c/($bytes/1e9))|floor) ms/GB"' \
		"$out/run.json"
}

for _ in $(seq "$rounds"); do
	for spec in "$@"; do
		name=${spec%%=*} rest=${spec#*=}
		bin=${rest%%@*} flags=""
		[ "$bin" = "$rest" ] || flags=${rest#*@}
		# shellcheck disable=SC2086
		run "$name" "$bin" $flags
	done
done
