// Package remotelog stores a closed log segment in an object store and reads it back:
// the remote half of tiered storage (KIP-405). It decides nothing: the replica manager
// chooses what to upload and when, and the controller records which upload counts.
//
// # Layout
//
// One upload of one segment is a handful of objects sharing a stem that names the
// topic id, the partition, the segment's base offset (zero-padded to 20 digits, so that
// keys sort in offset order, as Kafka names segment files) and a random upload id:
//
//	<topic id, 32 hex digits>/<partition>/<base offset, %020d>-<upload id, 32 hex digits>.log
//	                                                                                    .index
//	                                                                                    .timeindex
//	                                                                                    .txnindex   (only when not empty)
//	                                                                                    .snapshot   (only when not empty)
//	                                                                                    .manifest   (written last)
//
// The .log, .index, .timeindex and .txnindex objects hold the bytes of the local files,
// in the local formats (package log): the log cut to the segment's size, the indexes
// cut to their valid entries. .snapshot is the producer snapshot as the caller gave it.
// The .manifest is JSON (see manifest) describing the segment and the sizes of the
// other objects; its presence says the upload finished. A fresh upload id per attempt
// means a retried or superseded upload never overwrites one the controller may have
// recorded, and that orphans (uploads the controller never recorded) can be found by
// ListUploads and deleted by Delete.
//
// # Reads
//
// A Reader reads through a Source (a ChunkCache, or Direct for no cache). It needs the
// manifest to know the sizes of the indexes, and keeps the manifests it read in memory.
package remotelog
