#!/usr/bin/env bash
# Cross-cluster mirroring (issue 29): the throughput of a cluster link and a mirror's lag,
# side by side in one run.
#
# usage: bench/mirror.sh [-s SECONDS] [-n NODES] [-r RECORDS] [-o OUT] [-D DATA]
#
# Two fresh clusters of NODES combined nodes each (default 1; with 3, topics are RF=3,
# min.insync.replicas=2, acks=all) on loopback, data under DATA (default .tmp/ of the
# repository, on disk), and a link from the destination to the source.
#   1. throughput: the omb-1k workload closed loop writes RECORDS (default 300000) 1 KiB
#      records to the source (its produce rate is the source's peak); then the topic is
#      mirrored, and the time until the destination holds every record (the mirror's lag
#      metrics at 0, their source ends at the source's) gives the link's MB/s (bytes from
#      shale_mirror_bytes_copied_total);
#   2. lag: a topic, mirrored before it is written, takes the e2e-latency workload (the
#      same 1 KiB shape) at half of that peak for SECONDS (default 60) while the
#      destination's mirror metrics are sampled every second: the worst partition's lag in
#      seconds and records, and how long the mirror takes to drain once the producer
#      stops; before that, the same at half of the link's copy rate from step 1, for when
#      half of the peak is more than the link carries.
# A table of the figures, with the load average, goes to stdout; everything else into
# OUT. SHALE=path picks the binary (default bin/shale).
set -euo pipefail

secs=60
nodes=1
records=300000
out=""
data_root=""
while getopts "s:n:r:o:D:h" opt; do
	case $opt in
	s) secs=$OPTARG ;;
	n) nodes=$OPTARG ;;
	r) records=$OPTARG ;;
	o) out=$OPTARG ;;
	D) data_root=$OPTARG ;;
	*) sed -n '2,22p' "$0"; exit 2 ;;
	esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
SHALE=${SHALE:-$root/bin/shale}
data_root=${data_root:-$root/.tmp}
out=${out:-$data_root/mirror-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" "$data_root"
data=$(mktemp -d "$data_root/mirror-data-XXXXXX")

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$data"
}
trap cleanup EXIT

# start_cluster NAME: NODES fresh nodes; sets <NAME>_bootstrap and <NAME>_http (a list).
# Every node has its HTTP listener (metrics) and REST proxy.
start_cluster() {
	local name=$1 ports i voters="" bootstrap="" https="" rests="" listen
	read -r -a ports < <(free_ports $((4 * nodes)))
	for i in $(seq 0 $((nodes - 1))); do
		voters+="${voters:+,}$((i + 1))@127.0.0.1:${ports[4 * i + 1]}"
		bootstrap+="${bootstrap:+,}127.0.0.1:${ports[4 * i]}"
		https+="${https:+ }127.0.0.1:${ports[4 * i + 2]}"
		rests+="${rests:+ }127.0.0.1:${ports[4 * i + 3]}"
	done
	local first=${#pids[@]}
	for i in $(seq 0 $((nodes - 1))); do
		mkdir -p "$data/$name.n$((i + 1))"
		listen="PLAINTEXT://127.0.0.1:${ports[4 * i]},CONTROLLER://127.0.0.1:${ports[4 * i + 1]}"
		local quorum=()
		[ "$nodes" -eq 1 ] || quorum=(--node.id=$((i + 1)) --controller.quorum.voters="$voters")
		"$SHALE" serve "${quorum[@]}" --log.dirs="$data/$name.n$((i + 1))" --listeners="$listen" \
			--schema.registry.listener= --rest.proxy.listener="127.0.0.1:${ports[4 * i + 3]}" \
			--http.listener="127.0.0.1:${ports[4 * i + 2]}" --default.replication.factor="$nodes" \
			>"$out/$name.n$((i + 1)).log" 2>&1 &
		pids+=($!)
	done
	for i in $(seq 0 $((nodes - 1))); do
		wait_ready "127.0.0.1:${ports[4 * i + 2]}" "${pids[$((first + i))]}" "$out/$name.n$((i + 1)).log"
	done
	printf -v "${name}_bootstrap" %s "$bootstrap"
	printf -v "${name}_http" %s "$https"
	printf -v "${name}_rest" %s "${rests%% *}"
}

topic_flags() {
	if [ "$nodes" -gt 1 ]; then echo "--replication-factor $nodes --topic-config min.insync.replicas=2"; else echo "--replication-factor 1"; fi
}

# mirror_stats TOPIC: from every destination node's metrics, the sum of the topic's
# partitions' source ends, the sum of their lag in records, the worst lag in seconds, the
# partitions reported, and the link's bytes copied.
mirror_stats() {
	local h
	for h in $dst_http; do curl -sf "http://$h/metrics" || true; done | python3 -c '
import sys, re
topic = sys.argv[1]
end = lag = worst = copied = 0.0
parts = set()
for line in sys.stdin:
    m = re.match(r"(shale_mirror_\w+)\{([^}]*)\} (\S+)", line)
    if not m:
        continue
    name, labels, v = m.group(1), m.group(2), float(m.group(3))
    if name == "shale_mirror_bytes_copied_total":
        copied += v
        continue
    if f"topic=\"{topic}\"" not in labels:
        continue
    if name == "shale_mirror_partition_source_end_offset":
        end += v
        parts.add(labels)
    elif name == "shale_mirror_partition_lag_records":
        lag += v
    elif name == "shale_mirror_partition_lag_seconds":
        worst = max(worst, v)
print(int(end), int(lag), f"{worst:.2f}", len(parts), int(copied))' "$1"
}

# source_total TOPIC: the sum of the topic's partitions' high watermarks on the source.
source_total() {
	local h
	for h in $src_http; do curl -sf "http://$h/metrics" || true; done | python3 -c '
import sys, re
topic, hw = sys.argv[1], {}
for line in sys.stdin:
    m = re.match(r"shale_high_watermark\{([^}]*)\} (\S+)", line)
    if m and f"topic=\"{topic}\"" in m.group(1):
        p = re.search(r"partition=\"(\d+)\"", m.group(1)).group(1)
        hw[p] = max(hw.get(p, 0), float(m.group(2)))
print(int(sum(hw.values())))' "$1"
}

start_cluster src
start_cluster dst
echo "clusters up: source $src_bootstrap, destination $dst_bootstrap (RF=$nodes), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/log" >&2
"$SHALE" link create --rest-url "http://$dst_rest" --link src --config "bootstrap.servers=$src_bootstrap" >>"$out/log" 2>&1

# 1. Throughput.
echo "prefill: $records records, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log" >&2
cut -d' ' -f1-3 /proc/loadavg >"$out/copy.load0"
# shellcheck disable=SC2046
"$SHALE" bench e2e --bootstrap-server "$src_bootstrap" --preset omb-1k --topic bulk $(topic_flags) \
	--duration 0 --records "$records" --progress=false --json >"$out/prefill.json" 2>"$out/prefill.err"
peak=$(python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
print(int(min(x["records_per_sec"] for x in r["roles"] if x["role"] == "produce")))' "$out/prefill.json")
total=$(source_total bulk)
start=$(date +%s.%N)
"$SHALE" link mirror --rest-url "http://$dst_rest" --link src --source-topic bulk >>"$out/log" 2>&1
while :; do
	read -r end lag _ parts copied < <(mirror_stats bulk)
	echo "$(date -u +%T.%N) end $end lag $lag parts $parts copied $copied" >>"$out/copy.samples"
	[ "$parts" -gt 0 ] && [ "$lag" -eq 0 ] && [ "$end" -ge "$total" ] && break
	sleep 0.2
done
elapsed=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)")
echo "$copied $elapsed" >"$out/copy.result"
cut -d' ' -f1-3 /proc/loadavg >"$out/copy.load1"
echo "copied $copied bytes ($total records) in ${elapsed}s" | tee -a "$out/log" >&2

# 2. Lag at half of the source's peak and, as that can be more than the link carries, at
# half of the link's throughput too.
link_rate=$(python3 -c "import sys; print(int(int(sys.argv[1]) / float(sys.argv[2]) / 1024 / 2))" "$copied" "$elapsed")
# The lower rate first, and each phase's mirror drained before the next starts: a backlog
# left over would share the link and the cores with the next phase's copying.
for phase in "link:$link_rate" "peak:$(((peak + 1) / 2))"; do
	name=steady-${phase%%:*} rate=${phase#*:}
	# shellcheck disable=SC2046
	"$SHALE" bench e2e --bootstrap-server "$src_bootstrap" --preset e2e-latency --topic "$name" $(topic_flags) \
		--duration 0 --records 1 --progress=false --json >/dev/null 2>"$out/$name-create.err"
	"$SHALE" link mirror --rest-url "http://$dst_rest" --link src --source-topic "$name" >>"$out/log" 2>&1
	echo "$name: $rate rec/s for ${secs}s, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log" >&2
	echo "$rate" >"$out/$name.rate"
	cut -d' ' -f1-3 /proc/loadavg >"$out/$name.load0"
	# shellcheck disable=SC2046
	"$SHALE" bench e2e --bootstrap-server "$src_bootstrap" --preset e2e-latency --topic "$name" $(topic_flags) \
		--rate "$rate" --duration "${secs}s" --progress=false --json >"$out/$name.json" 2>"$out/$name.err" &
	b=$!
	while kill -0 "$b" 2>/dev/null; do
		read -r _ lag worst _ _ < <(mirror_stats "$name")
		echo "$lag $worst" >>"$out/$name.samples"
		sleep 1
	done
	wait "$b" || true
	cut -d' ' -f1-3 /proc/loadavg >"$out/$name.load1"
	t0=$(date +%s)
	drained=""
	while [ $(($(date +%s) - t0)) -lt 600 ]; do
		read -r end lag _ parts _ < <(mirror_stats "$name")
		if [ "$parts" -gt 0 ] && [ "$lag" -eq 0 ] && [ "$end" -ge "$(source_total "$name")" ]; then
			drained=$(($(date +%s) - t0))
			break
		fi
		sleep 1
	done
	echo "${drained:-no}" >"$out/$name.drain"
done

python3 - "$out" "$nodes" "$peak" <<'EOF'
import json, os, sys
out, nodes, peak = sys.argv[1], sys.argv[2], int(sys.argv[3])
def read(p):
    return open(os.path.join(out, p)).read().strip()
def pct(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
copied, elapsed = read("copy.result").split()
mbs = int(copied) / float(elapsed) / 1e6
print(f"link copy (RF={nodes}): {int(copied)/1e6:,.0f} MB in {float(elapsed):.1f} s = {mbs:.1f} MB/s; source peak (omb-1k) {peak:,} rec/s; load {read('copy.load0')} -> {read('copy.load1')}")
print()
print("| RF | steady rate | offered / produced rec/s | produced MB/s | mirror lag s p50 / p99 / max | lag records p50 / max | drained s after the producer stopped | load at start; end |")
print("|---|---|---:|---:|---|---|---:|---|")
for name, label in (("steady-link", "half of the link's copy rate"), ("steady-peak", "half of the source's peak")):
    samples = [l.split() for l in read(name + ".samples").splitlines() if l.strip()][2:]  # skip the workload's start
    secs = sorted(float(s[1]) for s in samples)
    recs = sorted(int(s[0]) for s in samples)
    rep = json.load(open(os.path.join(out, name + ".json")))
    prod = [r for r in rep["roles"] if r["role"] == "produce"][0]
    print(f"| {nodes} | {label} | {int(read(name + '.rate')):,} / {prod['records_per_sec']:,.0f} | {prod['mb_per_sec']:.1f} | "
          f"{pct(secs, .5):.2f} / {pct(secs, .99):.2f} / {max(secs or [float('nan')]):.2f} | {pct(recs, .5):,} / {max(recs or [0]):,} | {read(name + '.drain')} | "
          f"{read(name + '.load0')}; {read(name + '.load1')} |")
EOF
