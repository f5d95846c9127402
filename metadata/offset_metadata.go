package metadata

// DefaultOffsetMetadataMaxBytes is Kafka's default offset.metadata.max.bytes, the
// longest metadata string an offset commit may carry.
const DefaultOffsetMetadataMaxBytes = 4096

// MaxOffsetMetadataBytes is the controller's bound on a committed offset's metadata
// string, a sanity bound on what it stores in the quorum and not the limit clients see.
// That limit is offset.metadata.max.bytes (DefaultOffsetMetadataMaxBytes), which the
// group coordinator applies, answering OFFSET_METADATA_TOO_LARGE for each partition over
// it. offset.metadata.max.bytes may not be set above this bound, and both are measured by
// OffsetMetadataFits, so the controller never refuses a commit that the coordinator
// accepted. Kafka has no separate bound, but a commit there is one record of
// __consumer_offsets, which message.max.bytes (about 1 MiB by default) caps, so about
// 1 MiB is where Kafka stops too.
const MaxOffsetMetadataBytes = 1 << 20

// OffsetMetadataFits reports whether an offset commit's metadata string is within max,
// measured as Kafka measures it: Java's String.length(), UTF-16 code units, not bytes,
// despite the setting's name. A character outside the Basic Multilingual Plane counts
// two, every other one (and every byte of invalid UTF-8, which Java decodes to U+FFFD)
// one. OffsetCommit, TxnOffsetCommit and the controller's bound all ask it.
func OffsetMetadataFits(s string, max int) bool {
	// UTF-8 never takes fewer bytes than UTF-16 takes code units.
	if len(s) <= max {
		return true
	}
	units := 0
	for _, r := range s {
		if r > 0xFFFF { // a surrogate pair
			units += 2
		} else {
			units++
		}
		if units > max {
			return false
		}
	}
	return true
}
