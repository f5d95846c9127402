// Package sim is a deterministic simulation of a Shale cluster: the real metadata state
// machine (controller.Machine), three brokers each running the real replica manager,
// partitions and logs on a real directory, and idempotent acks=all producers and
// consumers, all in one goroutine. Time is virtual and every message (replica fetches
// and their answers, AlterPartition and heartbeats, metadata deliveries, produce and
// fetch requests) is an event on one seeded scheduler, so a seed replays its run
// exactly. Faults drawn from the seed: messages lost, delayed, duplicated and so
// reordered; broker crashes, and power cuts that take each broker's disk back to what
// it had fsynced (log.Faults.PowerLoss); brokers cut off from the controllers (their metadata
// then arrives coalesced); delayed metadata; links between brokers cut; clock jumps;
// retention by bytes and by time (backfilled timestamps); DeleteRecords; topic deletion
// and recreation under the same name; partition reassignment and its cancellation;
// controller failover.
//
// Checkers run after every event (a replica acts only for its own topic id; a current
// leader's high watermark never passes a member of the committed ISR; a log start never
// passes the high watermark; a consumer is never served another generation's records or
// records below an answered DeleteRecords, or at or above the high watermark) and on the settled cluster (no acknowledged
// record lost, no divergence below the high watermark, nothing served that the committed
// log lacks, no idempotent duplicate, no purge undone).
package sim
