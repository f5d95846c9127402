// Package log stores one partition's log: Kafka RecordBatch v2 bytes appended to mmap'd
// segment files, with sparse offset and time indexes beside each segment.
//
// The package knows nothing of Kafka beyond the RecordBatch header: it appends, reads,
// truncates, deletes old segments for retention, and recovers a torn tail after a crash.
// Offsets, leader epochs and producer state are decided by its callers.
//
// # Files
//
// A log directory holds, per segment, NNNNNNNNNNNNNNNNNNNN.log (the batches, named by the
// segment's base offset), .index (offset index: relative offset uint32, position
// uint32) and .timeindex (time index: timestamp int64, relative offset uint32), as in
// Kafka; and per log recovery-point-offset-checkpoint, log-start-offset-checkpoint and,
// after a clean Close, the clean-shutdown marker (with each segment's size and largest
// timestamp, so that a clean open opens no segment file). NNNNNNNNNNNNNNNNNNNN.txnindex
// holds the aborted transactions whose abort marker its segment received (Kafka's
// transaction index; its callers say what was aborted). A deleted segment's files are
// renamed NAME.deleted before their unlink in the background; Open removes those. Other
// files are left alone.
//
// The active segment's .log is preallocated (sparse) to segment.bytes and mapped; appends
// copy into the mapping. Writing into a hole of a sparse mapping on a full disk raises
// SIGBUS, so real blocks are reserved with fallocate ahead of the write position (a
// background goroutine keeps a few MiB reserved and pre-faulted; the appender reserves
// itself when it catches up) and a failed reservation is ErrStorage with nothing
// visible. The writable mappings are MADV_RANDOM: a fault in the preallocated tail would
// otherwise read around it by read_ahead_kb, and the kernel zero-fills all those unwritten
// pages in one stretch that can hold a core for tens of milliseconds. A rolled segment
// gets default read-around back for its readers; it is trimmed to its length, synced in
// the background, and the recovery point advanced past it.
//
// # Mappings
//
// Sealed segments are mapped on first use, read-only, and their index descriptors closed
// once they are durable. The log file's descriptor stays open while the segment is
// mapped, so that a View can name the file its chunks lie in (View.Sections) for
// sendfile(2): one descriptor per mapped segment, bounded like the mappings. A MapCache shared by every log of a broker (log.mapped.segments.max)
// bounds how many stay mapped: past it, the least recently used that no reader holds
// are unmapped, to be mapped again on their next use. After a clean open even the last
// segment stays unmapped until the first append makes it writable, so an idle
// partition costs no mapping at all.
//
// # Concurrency
//
// One appender at a time (an internal mutex), any number of readers that never take it:
// the end offset is published atomically after the bytes, the segment list is replaced
// copy-on-write, and a View pins the segments it points into by reference count, so
// retention, truncation and Close never unmap memory a View still uses.
//
// Nothing that waits on the disk runs under the append lock but what the caller asked
// for (flush.messages, the durable checkpoints of DeleteRecords and truncation): the
// trim and fsync of a rolled segment, the recovery point, and the close and unlink of
// deleted segments run on the log's Background (a goroutine per log by default, stopped
// by Close; the simulation's scheduler in tests/sim). Behind the write head the appender
// starts writeback every writeback.bytes (sync_file_range), so that dirty pages stay
// bounded.
//
// # Compaction
//
// Clean (cleaner.go) compacts a log as Kafka's cleaner does: a bounded map (OffsetMap)
// of each key in the dirty section to its latest offset, then a rewrite of the sealed
// segments below the caller's upper bound (the high watermark), oldest first, merging
// neighbours up to segment.bytes. A rewritten segment is written aside as
// BASE.log.cleaned, committed by renaming it to BASE.log.swap and swapped in (swap.go);
// Open deletes .cleaned files and completes .swap ones. Where the last pass ended is in
// cleaner-offset-checkpoint. Record encoding stays outside this package: the caller
// passes a RecordFilter (records.CompactionFilter in log/records). Compaction leaves batches
// with offset gaps or no records at all; recovery and AppendReplica accept them, Append
// does not.
//
// # Recovery
//
// Open trusts segments wholly below the recovery point (and everything after a clean
// shutdown, whose marker stays until the first change). It scans the rest, verifying
// every batch's CRC and header, cuts the log at
// the first torn or invalid batch (zeros after the last batch are the normal end of a
// preallocated file), deletes the segments after a damaged one, and rebuilds missing or
// damaged indexes.
package log
