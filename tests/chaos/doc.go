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
// Three more faults reach the data-safety paths of issue 23, each with a checker of its
// own (data_test.go): a topic deleted and recreated under the same name while a broker is
// cut off from the controllers (no consumer of the new topic may see the old one's
// records), DeleteRecords followed at once by kill -9 of the leader (no offset below an
// acknowledged low watermark may be served again), and retention by bytes while a
// follower is stopped (retention may remove only what is below the high watermark, so
// every acknowledged record was readable before it went).
//
// A mirror (issue 29, mirror_test.go) runs across two clusters on one bridge: the link
// between them is cut and healed while franz-go and kcat (librdkafka) producers write to
// the source, and the destination must then hold every acknowledged record at its offset.
//
// The tests need root (to create namespaces) and skip without it. A short run (three faults
// on the combined layout) is part of `go test ./...`; SHALE_CHAOS=full (what `make chaos`
// sets) runs both layouts with many more faults, the acks=1 demonstration and the
// data-safety faults (alone: SHALE_CHAOS=data, or recreate, purge, retention).
package chaos
