#!/usr/bin/env bash
# Tiered storage (issue 26): what uploading costs producers, how fast the remote log is
# read against the local one, and how long a wiped broker takes to rejoin with and
# without tiering, side by side in one run against a real S3 server (versitygw, POSIX
# backend, on loopback; built once into ~/.cache/shale by tests/s3server/build-versitygw.sh).
#
# usage: bench/tiered.sh [-s SECONDS] [-g GB] [-o OUT] [-D DATA]
#
# Data (Shale's and the object store's) goes under DATA, default .tmp/ of the repository,
# on disk.
#   1. produce, one node, RF=1: 4 producers (1 KiB records, 16 partitions, acks=all,
#      linger 1 ms, 128 KiB batches) closed loop for SECONDS (default 10; each run writes about 5 GB here) into a topic
#      without remote storage, then into one with remote.storage.enable=true (32 MiB
#      segments for both, local.retention.bytes 64 MiB), twice, alternating; the node
#      checks for segments to upload every second. Uploaded bytes per second during the
#      tiered runs come from shale_remote_log_upload_bytes_total; after each tiered run
#      the script waits for the upload lag to reach 0 (and says how long that took), so
#      that no upload overlaps the next run;
#   2. read, the same node: one consumer reads the tiered topic from offset 0 (its first
#      GB-sized part is remote only) for SECONDS, then the plain topic from offset 0
#      (local), then the tiered one again (its chunk cache now holds what the first read
#      fetched, up to remote.storage.cache.size.bytes);
#   3. rejoin: one controller and three brokers, a topic of GB (default 3) of 1 KiB
#      records at RF=3 (min.insync.replicas=2, 8 partitions, 16 MiB segments), first
#      without tiering and then, on the same cluster after deleting it, with
#      remote.storage.enable=true and local.retention.bytes 32 MiB, uploaded to the store
#      before the wipe. Each time a broker is killed (SIGKILL), its data directory
#      removed and the broker started again; the figure is the time from its start until
#      no partition of the topic is under-replicated, and the bytes of the topic's
#      directories on it then, beside those on a broker that stayed.
# A table of the figures, with the load average, goes to stdout; everything else into
# OUT. SHALE=path picks the binary (default bin/shale).
set -euo pipefail

secs=10
gb=3
out=""
data_root=""
while getopts "s:g:o:D:h" opt; do
	case $opt in
	s) secs=$OPTARG ;;
	g) gb=$OPTARG ;;
	o) out=$OPTARG ;;
	D) data_root=$OPTARG ;;
	*) sed -n '2,34p' "$0"; exit 2 ;;
	esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
SHALE=${SHALE:-$root/bin/shale}
data_root=${data_root:-$root/.tmp}
out=${out:-$data_root/tiered-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" "$data_root"
data=$(mktemp -d "$data_root/tiered-data-XXXXXX")
versitygw=$(bash "$root/tests/s3server/build-versitygw.sh" | sed -n 's/^build-versitygw.sh: versitygw at //p')
[ -x "$versitygw" ] || { echo "no versitygw binary" >&2; exit 1; }

pids=()
s3pid=""
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -z "$s3pid" ] || { kill -TERM "$s3pid" 2>/dev/null; wait "$s3pid" 2>/dev/null || true; }
	rm -rf "$data"
}
trap cleanup EXIT

# The object store: its own process, its own directory on the same disk as Shale's data.
access=shale-bench secret=shale-bench-secret bucket=shale
read -r s3port < <(free_ports 1)
mkdir -p "$data/s3/data" "$data/s3/meta"
"$versitygw" --port "127.0.0.1:$s3port" --access "$access" --secret "$secret" --quiet --health /health \
	posix --sidecar "$data/s3/meta" "$data/s3/data" >"$out/versitygw.log" 2>&1 &
s3pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$s3port/health" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access:$secret" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X PUT "http://127.0.0.1:$s3port/$bucket" >/dev/null
printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$access" "$secret" >"$data/s3/credentials"
tiered_flags=(--remote.log.storage.system.enable=true --remote.log.manager.task.interval.ms=1000
	--log.retention.check.interval.ms=1000 --remote.storage.s3.endpoint="http://127.0.0.1:$s3port"
	--remote.storage.s3.bucket="$bucket" --remote.storage.s3.path.style=true
	--remote.storage.s3.credentials.file="$data/s3/credentials"
	--remote.storage.cache.dir="$data/cache" --schema.registry.listener= --rest.proxy.listener=)
seg=33554432
local_bytes=67108864
producer=(--partitions 16 --producers 4 --acks all --linger 1ms --batch-max-bytes 128KiB --record-size 1KiB --progress=false --json)

# metric_sum NAME [TOPIC] HTTP...: the sum of a metric's series over the nodes, only the
# topic's series when TOPIC is not empty.
metric_sum() {
	local name=$1 topic=$2 h
	shift 2
	for h in "$@"; do curl -sf "http://$h/metrics" || true; done | python3 -c '
import sys, re
name, topic, total = sys.argv[1], sys.argv[2], 0.0
for line in sys.stdin:
    m = re.match(r"(\w+)(\{[^}]*\})? (\S+)", line)
    if m and m.group(1) == name and (not topic or f"topic=\"{topic}\"" in (m.group(2) or "")):
        total += float(m.group(3))
print(int(total))' "$name" "$topic"
}

# wait_uploaded HTTP...: waits (at most 600 s) until no closed segment waits for upload
# on the nodes and no upload has moved shale_remote_log_upload_bytes_total for 3 s (the
# lag gauge is as of the last upload pass; its per-partition series are summed over all
# topics, as one tiered topic is written at a time here), and prints the seconds it took.
wait_uploaded() {
	local t0 segs up last="" still=0
	t0=$(date +%s.%N)
	for _ in $(seq 600); do
		segs=$(metric_sum shale_remote_log_upload_lag_segments "" "$@")
		up=$(metric_sum shale_remote_log_upload_bytes_total "" "$@")
		if [ "$segs" -eq 0 ] && [ "$up" = "$last" ]; then
			still=$((still + 1))
			[ "$still" -lt 3 ] || break
		else
			still=0
		fi
		last=$up
		sleep 1
	done
	python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]) - 3:.1f}')" "$t0" "$(date +%s.%N)"
}

json_role() { # FILE ROLE FIELD
	python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print([x for x in r["roles"] if x["role"] == sys.argv[2]][0][sys.argv[3]])' "$@"
}

loadavg() { cut -d' ' -f1 /proc/loadavg; }

# 1 and 2: one node.
read -r kport cport hport < <(free_ports 3)
mkdir -p "$data/single"
"$SHALE" serve --log.dirs="$data/single" --listeners="PLAINTEXT://127.0.0.1:$kport,CONTROLLER://127.0.0.1:$cport" \
	--http.listener="127.0.0.1:$hport" "${tiered_flags[@]}" >"$out/single.log" 2>&1 &
pids+=($!)
wait_ready "127.0.0.1:$hport" "${pids[0]}" "$out/single.log"
single=127.0.0.1:$kport
echo "one node up at $single, object store at 127.0.0.1:$s3port; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/log" >&2

for run in plain-1 tiered-1 plain-2 tiered-2; do
	topic=${run%-*}
	cfg=(--topic-config "segment.bytes=$seg")
	[ "$topic" = plain ] || cfg+=(--topic-config remote.storage.enable=true --topic-config "local.retention.bytes=$local_bytes")
	up0=$(metric_sum shale_remote_log_upload_bytes_total "" "127.0.0.1:$hport")
	l0=$(loadavg)
	"$SHALE" bench produce --bootstrap-server "$single" --topic "$topic" "${cfg[@]}" "${producer[@]}" \
		--duration "${secs}s" >"$out/$run.json" 2>"$out/$run.err"
	up1=$(metric_sum shale_remote_log_upload_bytes_total "" "127.0.0.1:$hport")
	drain=0
	[ "$topic" = plain ] || drain=$(wait_uploaded "127.0.0.1:$hport")
	up2=$(metric_sum shale_remote_log_upload_bytes_total "" "127.0.0.1:$hport")
	echo "$run $(json_role "$out/$run.json" produce records_per_sec) $(json_role "$out/$run.json" produce mb_per_sec) $((up1 - up0)) $((up2 - up0)) $drain $l0 $(loadavg)" >>"$out/produce.results"
	echo "$run done; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log" >&2
done

# Local retention has had the time of the runs to delete what was uploaded.
sleep 3
for run in read-tiered-1 read-plain read-tiered-2; do
	topic=${run#read-}
	topic=${topic%-*}
	r0=$(metric_sum shale_remote_log_read_bytes_total "" "127.0.0.1:$hport")
	l0=$(loadavg)
	"$SHALE" bench consume --bootstrap-server "$single" --topic "$topic" --preload=false --consumers 1 \
		--duration "${secs}s" --progress=false --json >"$out/$run.json" 2>"$out/$run.err"
	r1=$(metric_sum shale_remote_log_read_bytes_total "" "127.0.0.1:$hport")
	echo "$run $(json_role "$out/$run.json" consume records_per_sec) $(json_role "$out/$run.json" consume mb_per_sec) $((r1 - r0)) $l0 $(loadavg)" >>"$out/read.results"
	echo "$run done; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log" >&2
done
kill -TERM "${pids[0]}"
wait "${pids[0]}" || true
pids=()
# Free the disk for 3: the node's data and its objects (the bucket stays).
rm -rf "$data/single" "$data/cache" "${data:?}/s3/data/$bucket"/*

# 3: a controller and three brokers.
read -r -a ports < <(free_ports 8)
voters="1@127.0.0.1:${ports[0]}"
common=(--controller.quorum.voters="$voters" --default.replication.factor=3 "${tiered_flags[@]}")
mkdir -p "$data/c1"
"$SHALE" serve --node.id=1 --process.roles=controller --listeners="CONTROLLER://127.0.0.1:${ports[0]}" \
	--log.dirs="$data/c1" --http.listener="127.0.0.1:${ports[1]}" "${common[@]}" >"$out/c1.log" 2>&1 &
pids+=($!)
bootstrap="" https=()
start_broker() { # N (2..4)
	local n=$1 i=$((2 * ($1 - 1)))
	mkdir -p "$data/b$n"
	"$SHALE" serve --node.id="$n" --process.roles=broker --listeners="PLAINTEXT://127.0.0.1:${ports[$i]}" \
		--log.dirs="$data/b$n" --http.listener="127.0.0.1:${ports[$((i + 1))]}" "${common[@]}" >>"$out/b$n.log" 2>&1 &
	pids[n - 1]=$!
}
for n in 2 3 4; do
	start_broker "$n"
	i=$((2 * (n - 1)))
	bootstrap+="${bootstrap:+,}127.0.0.1:${ports[$i]}"
	https+=("127.0.0.1:${ports[$((i + 1))]}")
done
for n in 2 3 4; do wait_ready "${https[$((n - 2))]}" "${pids[$((n - 1))]}" "$out/b$n.log"; done
echo "cluster up: $bootstrap; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log" >&2
records=$((gb * 1000000000 / 1024))
# Smaller segments and local retention than in 1, so that most of the topic is remote.
seg=16777216
local_bytes=33554432

for kind in full tiered; do
	topic=rejoin-$kind
	cfg=(--topic-config "segment.bytes=$seg" --topic-config min.insync.replicas=2)
	[ "$kind" = full ] || cfg+=(--topic-config remote.storage.enable=true --topic-config "local.retention.bytes=$local_bytes")
	"$SHALE" bench produce --bootstrap-server "$bootstrap" --topic "$topic" "${cfg[@]}" --replication-factor 3 \
		--partitions 8 --producers 4 --acks all --linger 1ms --batch-max-bytes 128KiB --record-size 1KiB \
		--progress=false --json --duration 0 --records "$records" >"$out/$topic.prefill.json" 2>"$out/$topic.prefill.err"
	if [ "$kind" = tiered ]; then
		wait_uploaded "${https[@]}" >/dev/null
		sleep 3 # local retention (checked every second) deletes what was uploaded
	fi
	# The victim is broker 4; every replica it holds must come back.
	kill -KILL "${pids[3]}"
	wait "${pids[3]}" 2>/dev/null || true
	before=$(du -scb "$data/b2/$topic"-* | tail -1 | cut -f1)
	rm -rf "$data/b4"
	l0=$(loadavg)
	t0=$(date +%s.%N)
	start_broker 4
	wait_ready "${https[2]}" "${pids[3]}" "$out/b4.log"
	while :; do
		urp=$("$SHALE" topic describe --bootstrap-server "$bootstrap" --topic "$topic" --under-replicated-partitions 2>/dev/null | grep -c 'Partition:' || true)
		[ "$urp" -eq 0 ] && break
		sleep 0.2
	done
	t1=$(date +%s.%N)
	copied=$(du -scb "$data/b4/$topic"-* | tail -1 | cut -f1)
	echo "$kind $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$t1") $copied $before $(json_role "$out/$topic.prefill.json" produce mb_per_sec) $l0 $(loadavg)" >>"$out/rejoin.results"
	echo "$topic: rejoined; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log" >&2
	"$SHALE" topic delete --bootstrap-server "$bootstrap" --topic "$topic" >>"$out/log" 2>&1
done

python3 - "$out" "$gb" "$secs" <<'EOF'
import os, sys
out, gb, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
def rows(name):
    return [l.split() for l in open(os.path.join(out, name)).read().splitlines() if l.strip()]
print("| produce run (closed loop) | rec/s | MB/s | uploaded MB/s during the run | upload lag drained after s | load at start; end |")
print("|---|---:|---:|---:|---:|---|")
prod = rows("produce.results")
for run, rps, mbs, up_run, up_all, drain, l0, l1 in prod:
    print(f"| {run} | {float(rps):,.0f} | {float(mbs):.1f} | {int(up_run)/1e6/secs:.1f} | {drain} | {l0}; {l1} |")
plain = [float(r[2]) for r in prod if r[0].startswith("plain")]
tiered = [float(r[2]) for r in prod if r[0].startswith("tiered")]
if plain and tiered:
    print(f"\nproduce MB/s with uploads against without: {sum(tiered)/len(tiered):.1f} / {sum(plain)/len(plain):.1f} = {sum(tiered)/sum(plain)*len(plain)/len(tiered):.2f}x")
print()
print("| read from offset 0, 1 consumer | rec/s | MB/s | of it from the object store, MB | load at start; end |")
print("|---|---:|---:|---:|---|")
for run, rps, mbs, remote, l0, l1 in rows("read.results"):
    print(f"| {run} | {float(rps):,.0f} | {float(mbs):.1f} | {int(remote)/1e6:,.0f} | {l0}; {l1} |")
print()
print(f"| wiped broker rejoins, {gb} GB topic at RF=3 | seconds to full ISR | bytes on the rejoined broker | bytes on a broker that stayed | prefill MB/s | load at start; end |")
print("|---|---:|---:|---:|---:|---|")
rj = rows("rejoin.results")
for kind, t, copied, before, mbs, l0, l1 in rj:
    print(f"| {kind} | {t} | {int(copied)/1e6:,.0f} MB | {int(before)/1e6:,.0f} MB | {float(mbs):.1f} | {l0}; {l1} |")
if len(rj) == 2:
    print(f"\nrejoin time tiered against full copy: {float(rj[1][1])/float(rj[0][1]):.2f}x")
EOF
