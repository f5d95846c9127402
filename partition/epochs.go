package partition

import "slices"

// epochEntry records that leader epoch Epoch started writing at StartOffset.
type epochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache maps leader epochs to the offsets where they began, as Kafka's
// leader-epoch-checkpoint does; OffsetForLeaderEpoch is answered from it. It is saved to
// that checkpoint before any batch of a new epoch is appended, so an open trusts the
// file, and merges the batch headers only where the log was recovered (see rebuild).
// Not safe for concurrent use: the Partition's mutex guards it.
type epochCache struct {
	entries []epochEntry // ascending in both fields
}

// assign notes that epoch wrote at offset; only a new, larger epoch adds an entry.
func (c *epochCache) assign(epoch int32, offset int64) {
	if epoch < 0 {
		return
	}
	if n := len(c.entries); n > 0 && c.entries[n-1].Epoch >= epoch {
		return
	}
	c.entries = append(c.entries, epochEntry{Epoch: epoch, StartOffset: offset})
}

// latest returns the newest epoch, -1 when empty.
func (c *epochCache) latest() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// endOffsetFor answers OffsetForLeaderEpoch: the largest epoch <= requested and the offset
// where the next epoch began (the log end offset when requested is the latest).
// (-1, -1) when requested is older than every epoch known.
func (c *epochCache) endOffsetFor(requested int32, logEnd int64) (int32, int64) {
	i, found := slices.BinarySearchFunc(c.entries, requested, func(e epochEntry, t int32) int { return int(e.Epoch) - int(t) })
	if !found {
		if i == 0 {
			return -1, -1
		}
		i-- // largest epoch below the requested one
	}
	if i == len(c.entries)-1 {
		return c.entries[i].Epoch, logEnd
	}
	return c.entries[i].Epoch, c.entries[i+1].StartOffset
}

// truncateFrom drops what the log lost when it was truncated to offset.
func (c *epochCache) truncateFrom(offset int64) {
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset >= offset {
		c.entries = c.entries[:len(c.entries)-1]
	}
}

// truncateBefore keeps the entries that still cover offsets at or after start.
func (c *epochCache) truncateBefore(start int64) {
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= start {
		i++
	}
	c.entries = c.entries[i:]
	if len(c.entries) > 0 && c.entries[0].StartOffset < start {
		c.entries[0].StartOffset = start
	}
}
