// Package records understands what is inside a Kafka RecordBatch v2 beyond its header:
// the compressed records payload and the individual records.
//
// The broker's produce path uses it to check a producer's batch the way Kafka's
// LogValidator does (Validate), to rewrite a batch with the topic's compression.type
// (Recompress), and tests and tools use it to build batches (Build) and read them
// (Records).
//
// Codecs are named and numbered as in Kafka: none (also "uncompressed"), gzip,
// snappy, lz4 and zstd. Snappy is written with the xerial framing Kafka's Java client
// uses and read both framed and as a raw block; lz4 is the standard LZ4 frame format of
// magic v2.
//
// Compressor and decompressor state is expensive to create, so it lives in a Codecs
// value that is safe for concurrent use; the package-level functions share one built
// with the default Config. Decompression is bounded by Config.MaxDecompressedBytes so a
// small hostile batch cannot expand into unbounded memory.
//
// The batch header itself (layout, CRC, codec constants) belongs to package log; this
// package builds on it, sits beneath it in the tree, and imports nothing else of Shale.
package records
