package controller

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/shalelog/shale/controller/proto"
)

// FuzzApplyRecords feeds arbitrary records to an FSM that already holds a busy state: it
// must never panic, and whatever it does must stay consistent with its own deltas.
func FuzzApplyRecords(f *testing.F) {
	seed := buildBusyFSM(f)
	for _, rec := range seed.log {
		f.Add(rec)
	}
	f.Add([]byte{0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		h := buildBusyFSM(t)
		var rec pb.Record
		if proto.Unmarshal(data, &rec) != nil {
			h.f.Apply(&raft.Log{Index: h.index + 1, Type: raft.LogCommand, Data: data})
			return
		}
		h.apply(&rec) // checks the mirror built from deltas
		// A snapshot of whatever state resulted must restore to the same state.
		g := newFSM(slog.New(slog.DiscardHandler))
		snap := snapshotBytes(t, h.f)
		if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(snapshotBytes(t, g), snap) {
			t.Fatal("snapshot round trip changed the state")
		}
	})
}

// FuzzRestoreSnapshot restores arbitrary bytes: an error or a state, never a panic or a
// hang.
func FuzzRestoreSnapshot(f *testing.F) {
	f.Add(snapshotBytes(f, buildBusyFSM(f).f))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := newFSM(slog.New(slog.DiscardHandler))
		if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			return
		}
		_ = snapshotBytes(t, g)
	})
}

// FuzzWatchUpdates applies arbitrary deltas and image chunks the way a broker does.
func FuzzWatchUpdates(f *testing.F) {
	h := buildBusyFSM(f)
	for _, d := range h.f.deltas.deltas {
		b, _ := proto.Marshal(&pb.MetadataUpdate{Update: &pb.MetadataUpdate_Delta{Delta: d}})
		f.Add(b)
	}
	for _, c := range imageChunks(h.f.img, h.f.sortedBrokersLocked(), 1<<20) {
		b, _ := proto.Marshal(&pb.MetadataUpdate{Update: &pb.MetadataUpdate_Image{Image: c}})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var u pb.MetadataUpdate
		if proto.Unmarshal(data, &u) != nil {
			return
		}
		switch x := u.Update.(type) {
		case *pb.MetadataUpdate_Delta:
			_, _ = applyDelta(emptyImage(), x.Delta)
		case *pb.MetadataUpdate_Image:
			var a imageAssembler
			_, _ = a.add(x.Image)
		}
	})
}
