package metadata

import "testing"

// TestRemoteLogSize: the reported size counts only the committed segments still part of
// the log; a segment being deleted, and a committed one wholly below the log start
// (DeleteRecords moved past it before its deletion started), are left out, while one
// the log start cuts into counts whole.
func TestRemoteLogSize(t *testing.T) {
	seg := func(id string, base, end, size int64, st RemoteSegmentState) RemoteSegment {
		return RemoteSegment{UploadID: id, BaseOffset: base, EndOffset: end, SizeBytes: size, State: st}
	}
	segs := []RemoteSegment{
		seg("d", 0, 9, 1, RemoteSegmentDeleteStarted),
		seg("c", 40, 49, 1000, RemoteSegmentCommitted),
		seg("a", 10, 19, 10, RemoteSegmentCommitted),  // wholly below the log start
		seg("b", 20, 39, 100, RemoteSegmentCommitted), // the log start cuts into it
	}
	rl := NewRemoteLog("t", [16]byte{1}, 0, 25, segs)
	if b, n := rl.Size(); b != 1100 || n != 2 {
		t.Fatalf("Size() = %d bytes in %d segments, want 1100 in 2", b, n)
	}
	// SizeBytes keeps counting what retention has yet to delete.
	if rl.SizeBytes != 1110 {
		t.Fatalf("SizeBytes = %d, want 1110", rl.SizeBytes)
	}

	// A log start at a segment's last offset keeps the segment.
	rl = NewRemoteLog("t", [16]byte{1}, 0, 19, segs)
	if b, n := rl.Size(); b != 1110 || n != 3 {
		t.Fatalf("log start 19: Size() = %d bytes in %d segments, want 1110 in 3", b, n)
	}
	// Every segment being deleted: nothing left.
	rl = NewRemoteLog("t", [16]byte{1}, 0, 10, []RemoteSegment{seg("d", 0, 9, 7, RemoteSegmentDeleteStarted)})
	if b, n := rl.Size(); b != 0 || n != 0 {
		t.Fatalf("only deleting: Size() = %d bytes in %d segments, want none", b, n)
	}
	var none *RemoteLog
	if b, n := none.Size(); b != 0 || n != 0 {
		t.Fatalf("nil remote log: Size() = %d, %d", b, n)
	}
}

// TestRemotePurger: the partition's leader at deletion purges while it is registered and
// unfenced; otherwise the lowest unfenced broker does; nobody when every broker is
// fenced.
func TestRemotePurger(t *testing.T) {
	im := &Image{Brokers: map[int32]Broker{1: {ID: 1}, 2: {ID: 2}, 3: {ID: 3}}}
	p := RemotePurge{TopicID: [16]byte{1}, Partition: 0, Leader: 3}
	if got := im.RemotePurger(p); got != 3 {
		t.Fatalf("leader alive: purger %d, want 3", got)
	}
	im.Brokers[3] = Broker{ID: 3, Fenced: true}
	im.Brokers[1] = Broker{ID: 1, Fenced: true}
	if got := im.RemotePurger(p); got != 2 {
		t.Fatalf("leader fenced: purger %d, want 2", got)
	}
	delete(im.Brokers, 3)
	if got := im.RemotePurger(RemotePurge{Leader: -1}); got != 2 {
		t.Fatalf("no leader: purger %d, want 2", got)
	}
	im.Brokers[2] = Broker{ID: 2, Fenced: true}
	if got := im.RemotePurger(p); got != -1 {
		t.Fatalf("every broker fenced: purger %d, want -1", got)
	}
}
