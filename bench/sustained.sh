#!/usr/bin/env bash
# Sustained tail latency (issue 25): e2e p99 at half of Shale's own peak for SECONDS on a
# node that has already written more than the kernel's dirty limit, RF=1 and RF=3, with
# log.writeback.bytes at its default and at 0 (off), beside the null broker at the same
# rate.
#
# usage: bench/sustained.sh [-s SECONDS] [-o OUT] [-D DATA] [RF...]
#
# For each RF (default: 1 3), on fresh nodes (one node for RF=1, three for RF=3, combined
# roles, data under DATA, default .tmp/ of the repository, on disk):
#   1. prefill: the omb-1k workload closed loop (RF=3: min.insync.replicas=2, acks=all)
#      until the machine has written 1.5x its dirty limit (vm.dirty_bytes, or
#      vm.dirty_ratio of MemAvailable; every replica's bytes count); its consume rate is
#      the peak;
#   2. the e2e-latency workload at half of the default run's peak for SECONDS (default
#      120) on the same nodes, with /proc/pressure and Dirty/Writeback of /proc/meminfo
#      sampled every 5 s and a 30 s CPU profile of node 1 in the middle of the window.
# Done with log.writeback.bytes at its default, then 0, then the null broker at the same
# rate. A table of the figures, with the load average, goes to stdout; everything else
# into OUT. SHALE=path picks the binary (default bin/shale).
set -euo pipefail

secs=120
out=""
data_root=""
while getopts "s:o:D:h" opt; do
	case $opt in
	s) secs=$OPTARG ;;
	o) out=$OPTARG ;;
	D) data_root=$OPTARG ;;
	*) sed -n '2,21p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- 1 3
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
SHALE=${SHALE:-$root/bin/shale}
data_root=${data_root:-$root/.tmp}
out=${out:-$data_root/sustained-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" "$data_root"

dirty_bytes=$(cat /proc/sys/vm/dirty_bytes)
if [ "$dirty_bytes" -eq 0 ]; then
	avail_kb=$(awk '/^MemAvailable/ {print $2}' /proc/meminfo)
	dirty_bytes=$((avail_kb * 1024 / 100 * $(cat /proc/sys/vm/dirty_ratio)))
fi
echo "dirty limit $((dirty_bytes / 1000000)) MB (vm.dirty_ratio $(cat /proc/sys/vm/dirty_ratio), dirty_background_ratio $(cat /proc/sys/vm/dirty_background_ratio), dirty_bytes $(cat /proc/sys/vm/dirty_bytes))" | tee "$out/machine"

pids=()
data=""
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -z "$data" ] || rm -rf "$data"
	pids=() data=""
}
trap cleanup EXIT

# start_nodes NAME N [serve flags...]: N fresh nodes; sets bootstrap and http1.
start_nodes() {
	local name=$1 n=$2; shift 2
	local ports i voters="" listen
	read -r -a ports < <(free_ports $((3 * n)))
	data=$(mktemp -d "$data_root/sustained-data-XXXXXX")
	bootstrap=""
	for i in $(seq 0 $((n - 1))); do
		voters+="${voters:+,}$((i + 1))@127.0.0.1:${ports[3 * i + 1]}"
		bootstrap+="${bootstrap:+,}127.0.0.1:${ports[3 * i]}"
	done
	for i in $(seq 0 $((n - 1))); do
		mkdir -p "$data/n$((i + 1))"
		listen="PLAINTEXT://127.0.0.1:${ports[3 * i]},CONTROLLER://127.0.0.1:${ports[3 * i + 1]}"
		local quorum=()
		[ "$n" -eq 1 ] || quorum=(--node.id=$((i + 1)) --controller.quorum.voters="$voters")
		"$SHALE" serve "${quorum[@]}" --log.dirs="$data/n$((i + 1))" --listeners="$listen" \
			--schema.registry.listener= --rest.proxy.listener= --http.listener="127.0.0.1:${ports[3 * i + 2]}" "$@" \
			>"$out/$name.n$((i + 1)).log" 2>&1 &
		pids+=($!)
	done
	for i in $(seq 0 $((n - 1))); do
		wait_ready "127.0.0.1:${ports[3 * i + 2]}" "${pids[$i]}" "$out/$name.n$((i + 1)).log"
	done
	http1=127.0.0.1:${ports[2]}
}

start_null() {
	local port
	port=$(free_ports 1)
	"$SHALE" bench null-serve --listen=127.0.0.1:"$port" >"$out/null.log" 2>&1 &
	pids+=($!)
	bootstrap=127.0.0.1:$port http1=""
	for _ in $(seq 100); do
		(echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "the null broker did not start" >&2
	return 1
}

# sample NAME: pressure and dirty data every 5 s until killed.
sample() {
	while :; do
		echo "$(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" \
			"cpu[$(head -1 /proc/pressure/cpu | cut -d' ' -f2-3)]" \
			"io[$(head -1 /proc/pressure/io | cut -d' ' -f2-3)]" \
			"iofull[$(tail -1 /proc/pressure/io | cut -d' ' -f2-3)]" \
			"mem[$(head -1 /proc/pressure/memory | cut -d' ' -f2-3)]" \
			"$(awk '/^(Dirty|Writeback):/ {printf "%s %d MB ", $1, $2/1024}' /proc/meminfo)"
		sleep 5
	done >"$out/$1.pressure"
}

rf_flags() { # rf_flags RF: the topic flags of a workload at that RF
	if [ "$1" -gt 1 ]; then echo "--replication-factor $1 --topic-config min.insync.replicas=2"; else echo "--replication-factor 1"; fi
}

# measure NAME RF RATE: e2e-latency at RATE for secs on the started target.
measure() {
	local name=$1 rf=$2 rate=$3
	echo "$name: e2e at $rate rec/s for ${secs}s, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log" >&2
	echo "$(cut -d' ' -f1-3 /proc/loadavg)" >"$out/$name.load0"
	sample "$name" &
	local sp=$!
	# shellcheck disable=SC2046
	"$SHALE" bench e2e --bootstrap-server "$bootstrap" --preset e2e-latency $(rf_flags "$rf") \
		--rate "$rate" --duration "${secs}s" --progress=true --json >"$out/$name.json" 2>"$out/$name.progress" &
	local b=$!
	if [ -n "$http1" ]; then
		sleep $((secs / 2))
		curl -sf "http://$http1/debug/pprof/profile?seconds=30" -o "$out/$name.cpu.pprof" || true
	fi
	wait $b || true
	kill "$sp" 2>/dev/null || true
	wait "$sp" 2>/dev/null || true
	echo "$(cut -d' ' -f1-3 /proc/loadavg)" >"$out/$name.load1"
}

for rf in "$@"; do
	nodes=1
	[ "$rf" -eq 1 ] || nodes=3
	rate=""
	for wb in default 0; do
		name=rf$rf-wb-$wb
		flags=()
		[ "$wb" = default ] || flags=(--log.writeback.bytes="$wb")
		start_nodes "$name" "$nodes" "${flags[@]}"
		records=${PREFILL_RECORDS:-$((dirty_bytes * 3 / 2 / 1024 / rf))}
		echo "$name: prefill $records records (RF=$rf), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log" >&2
		# shellcheck disable=SC2046
		"$SHALE" bench e2e --bootstrap-server "$bootstrap" --preset omb-1k --topic prefill $(rf_flags "$rf") \
			--duration 0 --records "$records" --progress=false --json >"$out/$name.prefill.json" 2>"$out/$name.prefill.err" || true
		peak=$(python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
rates = [x["records_per_sec"] for x in r["roles"]]
print(int(min(rates)))' "$out/$name.prefill.json")
		echo "$peak" >"$out/$name.peak"
		[ -n "$rate" ] || rate=$(((peak + 1) / 2))
		echo "$rate" >"$out/rf$rf.rate"
		measure "$name" "$rf" "$rate"
		cleanup
	done
	start_null
	measure "rf$rf-null" 1 "$rate"
	cleanup
done

python3 - "$out" "$@" <<'EOF'
import json, os, sys
out, rfs = sys.argv[1], sys.argv[2:]
def load(p):
    try:
        return json.load(open(os.path.join(out, p)))
    except Exception:
        return None
def role(rep, name):
    for r in (rep or {}).get("roles", []):
        if r["role"] == name:
            return r
def read(p):
    try:
        return open(os.path.join(out, p)).read().strip()
    except Exception:
        return "?"
print("| RF | target | peak rec/s | offered rec/s | consumed rec/s | e2e p50 / p99 / p99.9 / max ms | p99.9/p99 | load at start, end |")
print("|---|---|---:|---:|---:|---|---:|---|")
for rf in rfs:
    rate = read(f"rf{rf}.rate")
    for t in ("wb-default", "wb-0", "null"):
        name = f"rf{rf}-{t}"
        rep = load(name + ".json")
        c = role(rep, "consume") or {}
        l = c.get("latency") or {}
        peak = read(name + ".peak") if t != "null" else "-"
        label = {"wb-default": "shale, log.writeback.bytes default", "wb-0": "shale, log.writeback.bytes=0", "null": "null broker"}[t]
        ratio = f"{l['p99_9_ms']/l['p99_ms']:.1f}x" if l.get("p99_ms") else "?"
        lat = " / ".join(f"{l.get(k, float('nan')):.3g}" for k in ("p50_ms", "p99_ms", "p99_9_ms", "max_ms"))
        print(f"| {rf} | {label} | {peak} | {rate} | {c.get('records_per_sec', 0):,.0f} | {lat} | {ratio} | {read(name + '.load0')}; {read(name + '.load1')} |")
EOF
