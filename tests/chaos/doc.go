// Package chaos is a fault-injection harness for Shale's replication. Its tests start real
// `shale serve` processes, each in a network namespace of its own joined to a bridge on a
// private /24, and inject one fault at a time while an idempotent acks=all producer writes
// numbered records and a consumer group reads them: kill -9 and SIGSTOP of a partition
// leader, network partitions made of blackhole routes (a leader cut off from everyone, a
// leader cut off from the controllers, an isolated follower), kill -9 of the active
// controller, a rolling SIGTERM restart, and every broker killed at once. After each fault
// heals, every partition is read from its start to its high watermark and compared with
// what was acknowledged and what the consumer saw; any acknowledged record missing from
// the log, duplicated or reordered fails the test.
//
// The tests need root (to create namespaces) and skip without it. A short run (three faults
// on the combined layout) is part of `go test ./...`; SHALE_CHAOS=full (what `make chaos`
// sets) runs both layouts with many more faults, and the acks=1 demonstration.
package chaos
