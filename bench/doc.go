// Package bench is Shale's throughput and latency benchmark harness, behind
// `shale bench`.
//
// It drives any Kafka-compatible cluster with franz-go clients:
//
//   - produce: N producers send fixed-size records as fast as the cluster
//     acknowledges them (closed loop) or at a fixed rate (open loop, --rate).
//   - consume: the topic is preloaded, then N consumers read it back.
//   - e2e: producers and consumers run together; every record carries its
//     intended send time, and the consumer measures send-to-receive latency.
//
// With --rate the load is open loop: record i is due at start+i/rate and its
// latency is measured from that intended time, not from when the producer got
// round to sending it, so a stalled broker shows up as latency instead of
// silently lowering the offered load (coordinated omission).
//
// `shale bench compare` runs named workloads (presets mirroring published
// benchmarks) against several targets in one run: franz-go's kfake, the
// null broker (package nullbroker: a broker that only assigns offsets and
// keeps batches in memory, the ceiling for the client), a Shale node
// started as a subprocess, a 3-node Shale cluster for the replicated
// presets (RF=3 with acks=all against RF=1 with acks=1), and any external
// cluster, and sets the figures against this machine's own limits (loopback
// TCP and sequential disk writes) measured in the same run. Latencies go
// into HDR histograms.
//
// `compare --baseline-binary PATH` adds a second Shale build as the target
// baseline, for before-and-after ratios from one run. bench/profile.sh takes
// the broker's CPU and allocation profiles (and perf, GC and runtime traces)
// under these workloads.
//
// Progress lines go to stderr once a second; tables or JSON go to stdout.
package bench
