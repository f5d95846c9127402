package replication

import (
	"context"
	"time"

	"github.com/shalelog/shale/internal/metadata"
	"github.com/shalelog/shale/partition"
)

// alterPartitionTimeout bounds one AlterPartition call; a change that times out is
// proposed again at the next check.
const alterPartitionTimeout = 10 * time.Second

// isrLoop checks the partitions this broker leads for followers that fell behind, every
// half of replica.lag.time.max.ms as Kafka does.
func (m *Manager) isrLoop() {
	t := time.NewTicker(max(m.cfg.ReplicaLagTimeMax/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.CheckISR()
	}
}

// CheckISR proposes to drop from the ISR of every partition this broker leads the
// followers that have not caught up within replica.lag.time.max.ms (the ISR loop's
// check; a Driven manager's caller runs it).
func (m *Manager) CheckISR() {
	now := m.now()
	for _, p := range m.parts.All() {
		if p.Role() != partition.RoleLeader {
			continue
		}
		if c, ok := p.ProposeShrink(now, m.cfg.ReplicaLagTimeMax); ok {
			m.m.isrShrinks.Inc()
			m.alterISR(p, c)
		}
	}
}

// proposeExpand adds a caught-up follower to the ISR.
func (m *Manager) proposeExpand(p *partition.Partition, id int32) {
	if c, ok := p.ProposeExpand(id, m.now()); ok {
		m.m.isrExpands.Inc()
		m.alterISR(p, c)
	}
}

// alterISR sends an ISR change to the controller in the background. The committed
// change reaches the replica through the metadata; a refused or lost one is cleared so
// that it can be proposed again.
func (m *Manager) alterISR(p *partition.Partition, c partition.ISRChange) {
	m.wg.Add(1)
	m.cfg.Spawn(func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.ctx, alterPartitionTimeout)
		defer cancel()
		_, err := m.store.AlterPartition(ctx, metadata.AlterPartitionRequest{
			Topic: p.Topic(), Partition: p.Index(), LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch, NewISR: c.NewISR,
		})
		if err != nil {
			if m.ctx.Err() == nil {
				m.lg.Warn("ISR change refused", "topic", p.Topic(), "partition", p.Index(), "isr", c.NewISR, "err", err)
			}
			p.ISRChangeFailed(c, m.now())
			return
		}
		m.lg.Info("ISR changed", "topic", p.Topic(), "partition", p.Index(), "isr", c.NewISR)
	})
}
