package log

// Exported views of the on-disk index formats, for tiered storage (tiered/remotelog),
// which uploads a closed segment's files and reads them back from an object store.

const (
	// OffsetIndexEntrySize is the size of an .index entry: the batch's base offset
	// relative to the segment's base (uint32) and its byte position (uint32), big-endian.
	OffsetIndexEntrySize = offsetEntrySize
	// TimeIndexEntrySize is the size of a .timeindex entry: a timestamp (int64) and an
	// offset relative to the segment's base (uint32), big-endian.
	TimeIndexEntrySize = timeEntrySize
	// TxnIndexEntrySize is the size of a .txnindex entry.
	TxnIndexEntrySize = txnEntrySize
)

// DecodeTxnIndex decodes the bytes of a .txnindex file. It returns the entries of the
// valid prefix and an error describing what follows it, if anything.
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) { return decodeTxnIndex(b) }

// EncodeAbortedTxn appends the .txnindex encoding of a to dst.
func EncodeAbortedTxn(dst []byte, a AbortedTxn) []byte { return encodeAbortedTxn(dst, a) }

// TxnIndexFileName is the name, inside a log directory, of the aborted-transaction
// index of the segment with base offset base.
func TxnIndexFileName(base int64) string { return segmentFileName(base, txnIndexSuffix) }

// SegmentFileNames returns the names, inside a log directory, of the log, offset index
// and time index files of the segment with base offset base.
func SegmentFileNames(base int64) (logFile, offsetIndex, timeIndex string) {
	return segmentFileName(base, logSuffix), segmentFileName(base, indexSuffix), segmentFileName(base, timeIndexSuffix)
}
