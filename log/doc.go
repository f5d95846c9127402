// Package log stores one partition's log: Kafka RecordBatch v2 bytes appended to mmap'd
// segment files, with sparse offset and time indexes beside each segment.
//
// The package knows nothing of Kafka beyond the RecordBatch header: it appends, reads,
// truncates, deletes old segments for retention, and recovers a torn tail after a crash.
// Offsets, leader epochs and producer state are decided by its callers.
package log
