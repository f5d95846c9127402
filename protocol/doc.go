// Package protocol is Shale's Kafka wire-protocol server: size-prefixed framing, request
// headers v0-v2, per-connection pipelining with responses in request order, and one
// handler per API key (00_produce.go, 01_fetch.go, ...). Requests are decoded and
// responses encoded with franz-go's kmsg; record batches pass through as raw bytes, and
// fetch responses are written from the log's memory-mapped slices without copying.
//
// Handlers call into the broker through Deps (metadata.Store, the replica manager, the
// group coordinator); they never talk to Raft directly.
package protocol
