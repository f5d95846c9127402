#!/usr/bin/env bash
# Cold reads beside hot ones (issue 25, KAFKA-7504): does a consumer catching up from
# offset 0 of a large log, whose pages are not in memory, hold up a consumer tailing the
# same topic?
#
# usage: bench/coldread.sh [-g GB] [-r RATE] [-d SECONDS] [-o OUT] [-- SERVE-FLAG...]
#
# One run, on one node (`shale serve`, data under DATA, default .tmp/ of the repository:
# on disk, not in /dev/shm):
#   1. prefill: GB (default 4) of 1 KiB records into the 16 partitions of topic `cold`,
#      closed loop; the node is then stopped (so that nothing of the log stays mapped),
#      its files synced and their pages dropped from the page cache with
#      posix_fadvise(POSIX_FADV_DONTNEED), which needs no root; `fincore` shows what is
#      left; the node is restarted on the same data;
#   2. alone: the e2e-latency preset's producers and tailing consumers on `cold` at RATE
#      records/s (default 50000) for SECONDS (default 20);
#   3. beside a catch-up: the same again, with a `bench consume` reading `cold` from its
#      start (the cold prefill) at full speed over the same window;
#   4. the same again, the catch-up now reading what 3 left in the page cache: what 3
#      costs beyond 4 is the disk, not the reader's CPU.
# The tail consumers' send-to-receive p50/p99/p99.9 of 2, 3 and 4 are printed side by side,
# with the catch-up reader's rate and the node's major faults and read bytes.
# The catch-up reader's client id is shale-bench-catchup; -q BYTES gives it a Kafka
# consumer_byte_rate quota of BYTES per second (`shale quota set`), which is how a Kafka
# operator keeps a catch-up reader from taking the machine from the tail.
# SHALE=path picks the binary (default bin/shale, built by `make build`); PERF=1 also
# records the stacks of the broker's major page faults during 3.
set -euo pipefail

gb=4
rate=50000
dur=20
out=""
data_root=""
quota=""
while getopts "g:r:d:o:D:q:h" opt; do
	case $opt in
	g) gb=$OPTARG ;;
	r) rate=$OPTARG ;;
	d) dur=$OPTARG ;;
	o) out=$OPTARG ;;
	D) data_root=$OPTARG ;;
	q) quota=$OPTARG ;;
	*) sed -n '2,27p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
SHALE=${SHALE:-$root/bin/shale}
data_root=${data_root:-$root/.tmp}
out=${out:-$data_root/coldread-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" "$data_root"
data=$(mktemp -d "$data_root/coldread-data-XXXXXX")
broker_pid=""
cleanup() {
	if [ -n "$broker_pid" ]; then kill -TERM "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; fi
	rm -rf "$data"
}
trap cleanup EXIT

read -r p0 p1 p2 < <(free_ports 3)
kafka=127.0.0.1:$p0 http=127.0.0.1:$p1
start_broker() {
	"$SHALE" serve --log.dirs="$data" \
		--listeners="PLAINTEXT://$kafka,CONTROLLER://127.0.0.1:$p2" --schema.registry.listener= --rest.proxy.listener= --http.listener="$http" "$@" \
		>>"$out/broker.log" 2>&1 &
	broker_pid=$!
	wait_ready "$http" "$broker_pid" "$out/broker.log"
}
stop_broker() {
	kill -TERM "$broker_pid"
	wait "$broker_pid" || true
	broker_pid=""
}
# proc_io: the broker's major faults and bytes read from storage so far.
proc_io() {
	local majflt rb
	majflt=$(awk '{print $12}' /proc/"$broker_pid"/stat)
	rb=$(awk '/^read_bytes/ {print $2}' /proc/"$broker_pid"/io 2>/dev/null || echo 0)
	echo "$majflt $rb"
}

records=$((gb * 1000 * 1000))
echo "prefill: $records records of 1 KiB into cold (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
start_broker "$@"
"$SHALE" bench produce --bootstrap-server "$kafka" --topic cold --partitions 16 --record-size 1KiB \
	--producers 4 --acks 1 --warmup 0s --duration 0 --records "$records" --progress=false --json >"$out/prefill.json"
stop_broker
python3 - "$data" <<'EOF'
import os, sys
n = 0
for dp, _, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(dp, f)
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n += os.fstat(fd).st_size
        finally:
            os.close(fd)
print(f"dropped the cached pages of {n/1e9:.2f} GB of files", file=sys.stderr)
EOF
fincore -b $(find "$data" -name '*.log' | sort | head -3) >&2 || true
start_broker "$@"
if [ -n "$quota" ]; then
	"$SHALE" quota set --bootstrap-server "$kafka" --client shale-bench-catchup "consumer_byte_rate=$quota" >&2
fi

# sample NAME: CPU and IO pressure every 2 s until killed.
sample() {
	while :; do
		echo "$(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) cpu[$(head -1 /proc/pressure/cpu | cut -d' ' -f2)] io[$(head -1 /proc/pressure/io | cut -d' ' -f2)] iofull[$(tail -1 /proc/pressure/io | cut -d' ' -f2)]"
		sleep 2
	done >"$out/$1.pressure"
}
e2e() { # e2e NAME: the tailing consumers at RATE for SECONDS
	"$SHALE" bench e2e --bootstrap-server "$kafka" --preset e2e-latency --topic cold --group "tail-$1" \
		--rate "$rate" --duration "${dur}s" --progress=false --json >"$out/$1.json"
}
echo "alone: e2e at $rate rec/s for ${dur}s (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
io0=$(proc_io)
e2e alone
io1=$(proc_io)
echo "beside a catch-up reader (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
"$SHALE" bench consume --bootstrap-server "$kafka" --topic cold --preload=false --consumers 1 --client-id shale-bench-catchup \
	--duration "${dur}s" --progress=false --json >"$out/catchup.json" 2>"$out/catchup.err" &
catchup=$!
sample beside &
sp=$!
(sleep $((dur / 4)) && curl -sf "http://$http/debug/pprof/profile?seconds=$((dur / 2))" -o "$out/beside.cpu.pprof") &
if [ "${PERF:-0}" = 1 ]; then
	# Where the broker's major faults come from (perf report -i beside.faults.data).
	perf record -e major-faults -g -p "$broker_pid" -o "$out/beside.faults.data" -- sleep "$dur" >/dev/null 2>&1 &
fi
e2e beside
io2=$(proc_io)
kill "$sp" 2>/dev/null || true
kill -INT "$catchup" 2>/dev/null || true
wait "$catchup" || true
# The same catch-up again: the log is now in the page cache (it fits in memory), so what
# differs from the cold run is the disk, not the reader's CPU.
echo "beside a catch-up reader of cached data (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
fincore -b $(find "$data" -name '*.log' | sort | head -2) >&2 || true
# Read from the start again whenever it reaches the end, for the whole window.
(
	i=0
	while [ ! -e "$out/warm.stop" ]; do
		i=$((i + 1))
		"$SHALE" bench consume --bootstrap-server "$kafka" --topic cold --preload=false --consumers 1 --client-id shale-bench-catchup \
			--duration "${dur}s" --progress=false --json >"$out/catchup-warm.$i.json" 2>>"$out/catchup-warm.err" &
		echo $! >"$out/warm.pid"
		wait $! || true
	done
) &
catchup=$!
sample warm &
sp=$!
e2e warm
io3=$(proc_io)
kill "$sp" 2>/dev/null || true
touch "$out/warm.stop"
kill -INT "$(cat "$out/warm.pid")" 2>/dev/null || true
wait "$catchup" || true
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$out" "$rate" "$io0" "$io1" "$io2" "$io3" <<'EOF'
import json, sys, os
out, rate = sys.argv[1], sys.argv[2]
io = [list(map(int, a.split())) for a in sys.argv[3:7]]
def role(path, name):
    try:
        rep = json.load(open(os.path.join(out, path)))
    except Exception as e:
        return None
    for r in rep.get("roles", []):
        if r["role"] == name:
            return r
pre = role("prefill.json", "produce")
print(f"prefill: {pre['bytes']/1e9:.2f} GB at {pre['mb_per_sec']:.0f} MB/s" if pre else "prefill: ?")
print(f"| tail consumer at {rate} rec/s | p50 ms | p99 ms | p99.9 ms | max ms | broker major faults | broker read MB |")
print("|---|---:|---:|---:|---:|---:|---:|")
for f, name, a, b in (("alone", "alone", io[0], io[1]), ("beside", "beside a catch-up reader of cold data", io[1], io[2]), ("warm", "beside a catch-up reader of cached data", io[2], io[3])):
    r = role(f + ".json", "consume")
    l = (r or {}).get("latency") or {}
    print(f"| {name} | {l.get('p50_ms', '?')} | {l.get('p99_ms', '?')} | {l.get('p99_9_ms', '?')} | {l.get('max_ms', '?')} | {b[0]-a[0]} | {(b[1]-a[1])/1e6:.0f} |")
import glob
for f in ["catchup.json"] + sorted(os.path.basename(p) for p in glob.glob(os.path.join(out, "catchup-warm.*.json"))):
    c = role(f, "consume")
    if c:
        print(f"{f}: {c['bytes']/1e9:.2f} GB in {c['seconds']:.1f} s, {c['mb_per_sec']:.0f} MB/s")
    else:
        print(f"{f}: no report (stopped at the end of the window)")
EOF
