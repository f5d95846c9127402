package log

// indexState decides where index entries go. Appends and index rebuilds share it, so a
// rebuilt index is the one the appends would have written.
//
// Before a batch at a non-zero position is written, if at least index.interval.bytes
// were written since the last entry, the batch gets an offset index entry (its base
// offset and position) and the time index gets the running largest timestamp with the
// offset of the batch that first reached it, when that timestamp is new.
type indexState struct {
	bytesSince  int64 // log bytes since the last offset index entry (or the segment start)
	maxTs       int64 // largest batch MaxTimestamp so far, -1 if none
	maxTsOffset int64 // base offset of the first batch with maxTs
}

func newIndexState(base int64) indexState { return indexState{maxTs: -1, maxTsOffset: base} }

// due reports whether the batch about to be written at pos gets index entries.
func (s *indexState) due(pos, interval int64) bool { return pos > 0 && s.bytesSince >= interval }

// indexed records that index entries were written before the next batch.
func (s *indexState) indexed() { s.bytesSince = 0 }

// add records a written batch.
func (s *indexState) add(n, base, maxTs int64) {
	s.bytesSince += n
	if maxTs > s.maxTs {
		s.maxTs, s.maxTsOffset = maxTs, base
	}
}
