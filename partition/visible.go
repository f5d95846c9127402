package partition

// A long-polling fetch (MinBytes, MaxWaitMs) parks on the partition's waiter, which every
// append and high-watermark move closes for every fetch parked on it. With
// fetch.min.bytes above what one append brings, most of those wake-ups cannot answer, and
// reading the log again to find that out costs each parked fetch a read per partition
// per append. The counters here let a woken fetch bound what a new read could add
// without reading: how many batch bytes became readable below each bound since it last
// read, and a generation that moves with anything else that changes a fetch's answer,
// so that those wake-ups still read at once as before.

// Mark is where a partition stood just before a fetch read it. Compared with the
// partition later (Since), it bounds from above what a new read could return beyond
// that read.
type Mark struct {
	gen       uint64
	leader    bool
	committed int64
	appended  int64
	hw        int64
}

// HighWatermark is the high watermark when the mark was taken (loaded after the byte
// counters): a read bounded at or above it saw every byte the committed count covers.
func (m Mark) HighWatermark() int64 { return m.hw }

// Progress is what changed since a Mark.
type Progress struct {
	// Committed and Appended are the batch bytes that the high watermark and the log end
	// passed since the mark: upper bounds of what a consumer's read (up to the high
	// watermark) or a follower's read (up to the log end) can return beyond the marked
	// one. A batch counts once its base offset is below the bound, as Log.Read returns
	// it whole then.
	Committed, Appended int64
	// HWMoved: the high watermark is not where it was.
	HWMoved bool
	// Changed: something other than data moved (role, leader or partition epoch, ISR,
	// log start, the replica closed), or the bytes cannot be told: read again.
	Changed bool
}

// pendingBatch is a batch the leader appended that the high watermark has not passed.
type pendingBatch struct {
	base int64
	size int64
}

// Mark snapshots the counters. Take it after the waiter and before the read: bytes that
// arrive in between are then both read and counted (a harmless overestimate later), and
// whatever arrives after the waiter closes it.
func (p *Partition) Mark() Mark {
	// The generation before the role: a role change stores the role and then moves the
	// generation, so a mark that saw the old role also holds the old generation.
	m := Mark{gen: p.visGen.Load()}
	m.leader = p.Role() == RoleLeader
	// Counters before the high watermark, which writers store before the counter: the
	// counted bytes are then all below m.hw.
	m.committed = p.committedBytes.Load()
	m.appended = p.appendedBytes.Load()
	m.hw = p.hw.Load()
	return m
}

// Since reports what changed since m. Re-arm the waiter before calling it: a change
// that Since misses then closes the new waiter.
func (p *Partition) Since(m Mark) Progress {
	pr := Progress{
		Committed: p.committedBytes.Load() - m.committed,
		Appended:  p.appendedBytes.Load() - m.appended,
		HWMoved:   p.hw.Load() != m.hw,
	}
	// Only a leader keeps the committed count (consumers read leaders only); a mark
	// taken off the leader role tells nothing.
	pr.Changed = !m.leader || p.visGen.Load() != m.gen
	return pr
}

// bumpGen tells parked fetches that their next wake-up must read again. Call it after
// the change is visible to readers (the role stored, the log start moved).
func (p *Partition) bumpGen() { p.visGen.Add(1) }

// noteAppendedLocked counts a batch the log now holds (after the append moved the log
// end). The leader also keeps it until the high watermark passes it.
func (p *Partition) noteAppendedLocked(base int64, size int) {
	p.appendedBytes.Add(int64(size))
	if p.Role() != RoleLeader {
		return
	}
	if len(p.pending)-p.pendingHead >= maxPending {
		// A follower in the ISR has stopped fetching (until replica.lag.time.max.ms
		// drops it) and the high watermark with it. Rather than keep every batch
		// appended meanwhile, forget them: as for an inherited tail, the high watermark
		// passing them moves the generation. (Merging entries would count bytes
		// before or after they are readable, and either can skip a read that answers.)
		p.pending, p.pendingHead = nil, 0
		p.pendingFrom = p.log.EndOffset()
		return
	}
	p.pending = append(p.pending, pendingBatch{base: base, size: int64(size)})
}

// maxPending bounds the batches a leader keeps above its high watermark (64 KiB).
const maxPending = 4096

// noteHWLocked counts the batches the leader's high watermark passed moving from old to
// hw (stored before this call).
func (p *Partition) noteHWLocked(old, hw int64) {
	if old < p.pendingFrom {
		// Batches this leader did not append (the tail it inherited as a follower or
		// found at startup) became visible: their sizes are not kept, so parked fetches
		// read again, as they did before these counters.
		p.bumpGen()
	}
	var n int64
	i := p.pendingHead
	for ; i < len(p.pending) && p.pending[i].base < hw; i++ {
		n += p.pending[i].size
	}
	p.pendingHead = i
	switch {
	case i == len(p.pending):
		p.pending, p.pendingHead = p.pending[:0], 0
	case i > len(p.pending)/2 && i > 64:
		// Under steady load the high watermark trails the log end forever: slide the
		// window down rather than grow the slice without bound.
		p.pending = p.pending[:copy(p.pending, p.pending[i:])]
		p.pendingHead = 0
	}
	if n > 0 {
		p.committedBytes.Add(n)
	}
}

// resetPendingLocked starts the leader's count afresh at the log end: what lies between
// the high watermark and there was appended under another leader.
func (p *Partition) resetPendingLocked() {
	p.pending, p.pendingHead = p.pending[:0], 0
	p.pendingFrom = p.log.EndOffset()
}
