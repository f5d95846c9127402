#!/usr/bin/env bash
# Profiles a Shale node under bench workloads (issue 19): for each workload a fresh
# `shale serve` (as `bench compare` starts it), the bench run against it, and from the
# broker's /debug/pprof a CPU profile and an allocation profile (a delta over the same
# window), plus its GC trace (GODEBUG=gctrace=1) and, with PERF=1, a `perf record -g` of
# the broker (kernel time: page faults, copies, the socket). Everything goes into OUT,
# with a .top summary of each profile and the load average before and after each run.
#
# usage: bench/profile.sh [-o OUT] [-d SECONDS] [-s SECONDS] [WORKLOAD...]
#
# workloads (default: matrix consume e2e):
#   produce-{1p,8p}-{100b,1k}-{acks1,acksall}   a produce preset (`shale bench presets`)
#   matrix      the eight produce presets above
#   sustained   produce-8p-1k-acks1 for -s seconds (default 60: several GB) with
#               log.segment.bytes=256 MiB, so the run crosses many segment rolls
#   consume     consume-1k: preload for -d seconds, profile the read-back
#   e2e         omb-1k's closed-loop peak, then e2e-latency at half of it on a fresh
#               node, with a runtime trace (trace.out, `go tool trace`) of 5 s;
#               E2E_RATE=records/s skips the peak and offers that rate instead
#   cluster-rf1-acks1, cluster-rf3-acksall
#               the replicated preset on three fresh nodes (combined roles, as
#               `bench compare --targets shale-cluster` starts them), every node's CPU
#               profile over the same window, and each node's CPU and run-queue wait
#
# The broker is built unstripped into bin/shale-prof (perf needs its symbols) unless
# SHALE=path is given. -d is the measured seconds of each run (default 10).
set -euo pipefail

out=""
dur=10
sustained=60
while getopts "o:d:s:h" opt; do
	case $opt in
	o) out=$OPTARG ;;
	d) dur=$OPTARG ;;
	s) sustained=$OPTARG ;;
	*) sed -n '2,25p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- matrix consume e2e
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
out=${out:-$root/bench/profiles/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
if [ -z "${SHALE:-}" ]; then
	SHALE=$root/bin/shale-prof
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$SHALE" ./cmd/shale)
fi
matrix="produce-1p-100b-acks1 produce-1p-100b-acksall produce-1p-1k-acks1 produce-1p-1k-acksall
produce-8p-100b-acks1 produce-8p-100b-acksall produce-8p-1k-acks1 produce-8p-1k-acksall"

broker_pid=""
node_pids=()
data=""
cleanup() {
	if [ -n "$broker_pid" ]; then kill -TERM "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; fi
	for p in "${node_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${node_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -z "$data" ] || rm -rf "$data"
	broker_pid="" data="" node_pids=()
}
trap cleanup EXIT

# start_broker NAME [serve flags...]: a fresh node; sets kafka and http.
start_broker() {
	local name=$1; shift
	read -r p0 p1 p2 < <(free_ports 3)
	data=$(mktemp -d /tmp/shale-profile-XXXXXX)
	kafka=127.0.0.1:$p0 http=127.0.0.1:$p1
	GODEBUG=gctrace=1 "$SHALE" serve --log.dirs="$data" \
		--listeners="PLAINTEXT://$kafka,CONTROLLER://127.0.0.1:$p2" --schema.registry.listener= --rest.proxy.listener= --http.listener="$http" "$@" \
		>"$out/$name.broker.log" 2>&1 &
	broker_pid=$!
	wait_ready "$http" "$broker_pid" "$out/$name.broker.log"
}

# profile NAME SECONDS: CPU and allocation profiles (and perf) of the broker.
profile() {
	local name=$1 secs=$2
	local s0
	s0=$(schedstat "$broker_pid")
	curl -sf "http://$http/debug/pprof/profile?seconds=$secs" -o "$out/$name.cpu.pprof" &
	local c=$!
	curl -sf "http://$http/debug/pprof/allocs?seconds=$secs" -o "$out/$name.allocs.pprof" &
	local a=$!
	if [ "${PERF:-0}" = 1 ]; then
		perf record -g -p "$broker_pid" -o "$out/$name.perf.data" -- sleep "$secs" >/dev/null 2>&1 || true
	fi
	wait $c $a
	local s1
	s1=$(schedstat "$broker_pid")
	echo "$s0 $s1 $secs" | awk '{printf "broker over %d s: on CPU %d ms (%.0f%% of one core), waiting for a CPU %d ms\n", $5, $3-$1, ($3-$1)/$5/10, $4-$2}' >"$out/$name.sched"
}

summarize() {
	local name=$1
	go tool pprof -top -nodecount=40 "$out/$name.cpu.pprof" >"$out/$name.cpu.top" 2>/dev/null || true
	go tool pprof -top -cum -nodecount=40 "$out/$name.cpu.pprof" >"$out/$name.cpu.cum.top" 2>/dev/null || true
	go tool pprof -top -sample_index=alloc_space -nodecount=30 "$out/$name.allocs.pprof" >"$out/$name.allocs.top" 2>/dev/null || true
	if [ -f "$out/$name.perf.data" ]; then
		perf report -i "$out/$name.perf.data" --no-children --stdio --percent-limit 1 -g none \
			>"$out/$name.perf.top" 2>/dev/null || true
	fi
	grep '^gc ' "$out/$name.broker.log" >"$out/$name.gctrace" || true
	echo "== $name: $(cat "$out/$name.load")"
	cat "$out/$name.sched" "$out/$name.client-cpu" 2>/dev/null || true
	head -18 "$out/$name.cpu.top" | tail -12
}

# run_produce NAME PRESET SECONDS [serve flags...]
run_produce() {
	local name=$1 preset=$2 secs=$3; shift 3
	start_broker "$name" "$@"
	echo "before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/$name.load"
	/usr/bin/time -f "bench client over the whole run: user %U s, system %S s, wall %e s" -o "$out/$name.client-cpu" \
		"$SHALE" bench produce --preset "$preset" --bootstrap-server "$kafka" --duration "${secs}s" --json \
		>"$out/$name.json" 2>"$out/$name.progress" &
	local b=$!
	sleep 2 # topic creation and the 1 s warm-up
	profile "$name" $((secs - 1))
	wait $b || true
	echo "after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/$name.load"
	cleanup
	summarize "$name"
}

run_consume() {
	local name=consume
	start_broker $name
	echo "before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/$name.load"
	/usr/bin/time -f "bench client over the whole run: user %U s, system %S s, wall %e s" -o "$out/$name.client-cpu" \
		"$SHALE" bench consume --preset consume-1k --bootstrap-server "$kafka" --duration "${dur}s" --json \
		>"$out/$name.json" 2>"$out/$name.progress" &
	local b=$!
	# The read-back starts once the preload is done; it is short, so profile 3 s of it.
	until grep -q '| consume' "$out/$name.progress" 2>/dev/null; do
		kill -0 $b 2>/dev/null || break
		sleep 0.2
	done
	profile $name 3
	wait $b || true
	echo "after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/$name.load"
	cleanup
	summarize $name
}

run_e2e() {
	local rate=${E2E_RATE:-}
	if [ -z "$rate" ]; then
		start_broker e2e-peak
		"$SHALE" bench e2e --preset omb-1k --bootstrap-server "$kafka" --duration "${dur}s" --json \
			>"$out/e2e-peak.json" 2>"$out/e2e-peak.progress" || true
		cleanup
		local peak
		peak=$(jq -r '[.roles[] | select(.role=="produce") | .records_per_sec][0] // 0' "$out/e2e-peak.json")
		rate=$(((${peak%.*} + 1) / 2))
		echo "omb-1k peak $peak rec/s; e2e-latency at $rate rec/s" | tee "$out/e2e.rate"
	else
		echo "e2e-latency at E2E_RATE=$rate rec/s" | tee "$out/e2e.rate"
	fi
	local name=e2e
	start_broker $name
	echo "before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/$name.load"
	/usr/bin/time -f "bench client over the whole run: user %U s, system %S s, wall %e s" -o "$out/$name.client-cpu" \
		"$SHALE" bench e2e --preset e2e-latency --rate "$rate" --bootstrap-server "$kafka" --duration "${dur}s" --json \
		>"$out/$name.json" 2>"$out/$name.progress" &
	local b=$!
	# Profile once records flow (after topic creation and the group join).
	until grep -q '| consume [1-9]' "$out/$name.progress" 2>/dev/null; do
		kill -0 $b 2>/dev/null || break
		sleep 0.2
	done
	profile $name $((dur / 2))
	curl -sf "http://$http/debug/pprof/trace?seconds=5" -o "$out/$name.trace.out" || true
	wait $b || true
	echo "after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/$name.load"
	cleanup
	summarize $name
}

# run_cluster PRESET: three nodes with combined roles, the preset against them, and a
# CPU profile of every node over the same window.
run_cluster() {
	local name=$1
	local ports
	read -r -a ports < <(free_ports 9)
	data=$(mktemp -d /tmp/shale-profile-XXXXXX)
	local voters="1@127.0.0.1:${ports[1]},2@127.0.0.1:${ports[4]},3@127.0.0.1:${ports[7]}"
	local bootstrap="127.0.0.1:${ports[0]},127.0.0.1:${ports[3]},127.0.0.1:${ports[6]}"
	local i
	for i in 0 1 2; do
		mkdir -p "$data/n$((i + 1))"
		GODEBUG=gctrace=1 "$SHALE" serve --node.id=$((i + 1)) --log.dirs="$data/n$((i + 1))" \
			--controller.quorum.voters="$voters" \
			--listeners="PLAINTEXT://127.0.0.1:${ports[3 * i]},CONTROLLER://127.0.0.1:${ports[3 * i + 1]}" \
			--schema.registry.listener= --rest.proxy.listener= --http.listener="127.0.0.1:${ports[3 * i + 2]}" >"$out/$name.n$((i + 1)).log" 2>&1 &
		node_pids+=($!)
	done
	for i in 0 1 2; do
		wait_ready "127.0.0.1:${ports[3 * i + 2]}" "${node_pids[$i]}" "$out/$name.n$((i + 1)).log"
	done
	echo "before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/$name.load"
	/usr/bin/time -f "bench client over the whole run: user %U s, system %S s, wall %e s" -o "$out/$name.client-cpu" \
		"$SHALE" bench produce --preset "$name" --bootstrap-server "$bootstrap" --duration "${dur}s" --json \
		>"$out/$name.json" 2>"$out/$name.progress" &
	local b=$!
	sleep 3 # topic creation, ISR and the warm-up
	local secs=$((dur - 2)) s0=() curls=()
	for i in 0 1 2; do
		s0+=("$(schedstat "${node_pids[$i]}")")
		curl -sf "http://127.0.0.1:${ports[3 * i + 2]}/debug/pprof/profile?seconds=$secs" -o "$out/$name.n$((i + 1)).cpu.pprof" &
		curls+=($!)
	done
	wait "${curls[@]}" || true
	: >"$out/$name.sched"
	for i in 0 1 2; do
		echo "${s0[$i]} $(schedstat "${node_pids[$i]}") $secs" | awk -v n=$((i + 1)) \
			'{printf "node %d over %d s: on CPU %d ms (%.0f%% of one core), waiting for a CPU %d ms\n", n, $5, $3-$1, ($3-$1)/$5/10, $4-$2}' \
			>>"$out/$name.sched"
	done
	wait $b || true
	echo "after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/$name.load"
	cleanup
	echo "== $name: $(cat "$out/$name.load")"
	cat "$out/$name.sched" "$out/$name.client-cpu"
	for i in 1 2 3; do
		go tool pprof -top -nodecount=40 "$out/$name.n$i.cpu.pprof" >"$out/$name.n$i.cpu.top" 2>/dev/null || true
		go tool pprof -top -cum -nodecount=60 "$out/$name.n$i.cpu.pprof" >"$out/$name.n$i.cpu.cum.top" 2>/dev/null || true
	done
	head -14 "$out/$name.n1.cpu.top" | tail -8
}

for w in "$@"; do
	case $w in
	matrix) for p in $matrix; do run_produce "$p" "$p" "$dur"; done ;;
	produce-*) run_produce "$w" "$w" "$dur" ;;
	sustained) run_produce sustained produce-8p-1k-acks1 "$sustained" --log.segment.bytes=268435456 ;;
	consume) run_consume ;;
	e2e) run_e2e ;;
	cluster-*) run_cluster "$w" ;;
	*) echo "unknown workload $w" >&2; exit 2 ;;
	esac
done
echo "profiles in $out"
