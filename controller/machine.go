package controller

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// Machine is the controller's state machine driven by its caller instead of Raft: each
// record is applied at the next log index, in the order the caller gives. Raft's job is to
// agree on that order; the deterministic simulation (tests/sim) plays a linearizable log
// instead, so that the metadata rules it exercises (placement, elections on fencing,
// AlterPartition's epoch checks, reassignment) are the production ones while every outcome
// follows from the seed. A controller failover is a new Machine restored from another's
// snapshot: what an elected controller rebuilds from the replicated log.
type Machine struct {
	f     *fsm
	index uint64
}

// NewMachine returns an empty metadata state machine.
func NewMachine(lg *slog.Logger) *Machine {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Machine{f: newFSM(lg)}
}

// Apply commits rec at the next index and returns the Kafka error the record's rules
// answered (nil when it applied). A record the rules refuse still takes its index, as a
// refused Raft entry does.
func (m *Machine) Apply(rec *pb.Record) error {
	data, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode metadata record: %w", err)
	}
	m.index++
	res, _ := m.f.Apply(&raft.Log{Index: m.index, Type: raft.LogCommand, Data: data}).(applyResult)
	return res.err
}

// DryRun checks rec against the current state without applying it, as the active
// controller does before it proposes a request that may be stale.
func (m *Machine) DryRun(rec *pb.Record) error { return m.f.dryRun(rec).err }

// Image is the committed metadata image.
func (m *Machine) Image() *metadata.Image { return m.f.image() }

// Index is the index of the last applied record.
func (m *Machine) Index() uint64 { return m.index }

// Failover returns the state machine a newly elected controller runs: restored from a
// snapshot of this one, so that only what the log replicates survives.
func (m *Machine) Failover() (*Machine, error) {
	snap, err := m.f.Snapshot()
	if err != nil {
		return nil, err
	}
	var buf machineSink
	if err := snap.Persist(&buf); err != nil {
		return nil, err
	}
	n := NewMachine(m.f.log)
	if err := n.f.Restore(io.NopCloser(&buf.Buffer)); err != nil {
		return nil, err
	}
	n.index = m.index
	return n, nil
}

// machineSink is a raft.SnapshotSink in memory.
type machineSink struct{ bytes.Buffer }

func (*machineSink) ID() string    { return "machine" }
func (*machineSink) Cancel() error { return nil }
func (*machineSink) Close() error  { return nil }

var _ raft.SnapshotSink = (*machineSink)(nil)
