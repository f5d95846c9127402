// Package protocol is Shale's Kafka wire-protocol server: size-prefixed framing, request
// headers v0-v2, per-connection pipelining with responses in request order, and one
// handler per API key (00_produce.go, 01_fetch.go, ...). Requests are decoded and
// responses encoded with franz-go's kmsg; record batches pass through as raw bytes, and
// fetch responses are written from the log's memory-mapped slices without copying.
//
// Handlers call into the broker through Deps (metadata.Store, the replica manager, the
// group coordinator); they never talk to Raft directly.
//
// One file per API key, as in franz-go's kfake: NN_name.go (NN the key; 29_acls.go holds
// keys 29-31 and auth.go the SASL keys 17 and 36, beside their handlers) has the handler
// and ends with the API's declaration, one api value:
//
//	var produceAPI = api{key: kmsg.Produce, min: 0, max: 9, handle: (*Server).handleProduce, errors: errorsOf(produceError)}
//
// with a comment on why the version range is what it is, the services it needs (needs:
// needGroups, ...; an API whose services the broker lacks is not advertised), and the
// builder of the response that refuses a request of it with a code (nil: the connection
// is closed instead). apis.go lists every value in key order; there is no other table of
// versions, handlers or error responses. testdata/golden pins what they produce: run
// go test ./protocol -run TestGolden -update after changing a range or a builder, and
// read the diff.
package protocol
