package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

// ElectLeaders runs a PREFERRED (preferred) or UNCLEAN election for the given partitions,
// nil for all of them, and returns each partition's outcome: nil when it was elected,
// else a Kafka error (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION). With nil partitions, the
// partitions that needed no election are left out.
func (c *BrokerClient) ElectLeaders(ctx context.Context, preferred bool, partitions map[string][]int32) (map[string]map[int32]error, error) {
	req := &pb.ElectLeadersRequest{Type: pb.ElectionType_ELECTION_TYPE_UNCLEAN, AllPartitions: partitions == nil,
		Partitions: topicPartitionsPB(partitions)}
	if preferred {
		req.Type = pb.ElectionType_ELECTION_TYPE_PREFERRED
	}
	resp, err := rpc(ctx, c, pb.ControllerClient.ElectLeaders, req)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]error{}
	for _, r := range resp.Results {
		if out[r.Topic] == nil {
			out[r.Topic] = map[int32]error{}
		}
		out[r.Topic][r.Partition] = fromPBError(r.Error)
	}
	return out, nil
}

// listenersPB lists the advertised listeners, the inter-broker one first: brokers
// replicate from, and older code reads, the first.
func (c *BrokerClient) listenersPB() []*pb.Listener {
	proto := c.cfg.SecurityProtocol
	if proto == "" {
		proto = "PLAINTEXT"
	}
	out := []*pb.Listener{{Name: c.cfg.ListenerName, Host: c.cfg.Host, Port: c.cfg.Port, SecurityProtocol: proto}}
	for _, e := range c.cfg.OtherListeners {
		out = append(out, &pb.Listener{Name: e.Name, Host: e.Host, Port: e.Port, SecurityProtocol: e.SecurityProtocol})
	}
	return out
}

// register registers this process, retrying while another process's session for the
// same id is still alive.
func (c *BrokerClient) register(ctx context.Context) error {
	req := &pb.RegisterBrokerRequest{
		BrokerId:    c.cfg.NodeID,
		Incarnation: c.incarnation,
		Listeners:   c.listenersPB(),
		Rack:        c.cfg.Rack,
	}
	backoff := 100 * time.Millisecond
	for {
		resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.RegisterBroker, req)
		if err != nil {
			return fmt.Errorf("controller client: register broker %d: %w", c.cfg.NodeID, err)
		}
		err = fromPBError(resp.Error)
		if err == nil {
			c.mu.Lock()
			c.epoch, c.fenced, c.leaseUntil = resp.BrokerEpoch, true, time.Time{}
			c.signalLeaseLocked()
			c.mu.Unlock()
			c.log.Info("broker registered with the controller quorum", "epoch", resp.BrokerEpoch, "cluster_id", resp.ClusterId)
			return nil
		}
		if !errors.Is(err, kerr.DuplicateBrokerRegistration) {
			return fmt.Errorf("controller client: register broker %d: %w", c.cfg.NodeID, err)
		}
		c.log.Info("waiting for the previous registration of this broker id to expire", "err", err)
		if !sleepCtx(ctx, backoff) {
			return fmt.Errorf("controller client: register broker %d: %w (%v)", c.cfg.NodeID, ctx.Err(), err)
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (c *BrokerClient) signalLeaseLocked() {
	close(c.leaseCh)
	c.leaseCh = make(chan struct{})
}

// ControlledShutdown is the broker's side of Kafka's controlled shutdown: it heartbeats
// with want_shutdown (keeping its lease alive meanwhile) so that the controller moves
// every leadership it can to another in-sync replica and takes this broker out of the
// ISRs, until the controller answers should_shut_down; it then waits until the metadata
// cache shows the result, so that whatever follows the cache has seen its leadership go,
// and returns. The broker stays registered and unfenced until Close (or until its
// heartbeats stop), still leading the partitions nobody else could take. It returns
// ctx's error when ctx ends first.
func (c *BrokerClient) ControlledShutdown(ctx context.Context) error {
	if c.ctx.Err() != nil {
		return errors.New("controller client: closed")
	}
	started := time.Now()
	c.shuttingDown.Store(true)
	c.kickHeartbeat()
	// Ask again briskly rather than at the heartbeat interval: the answer usually comes
	// with the first heartbeat, and a node waiting to stop should not wait seconds more.
	poll := time.NewTicker(min(c.cfg.HeartbeatInterval, 100*time.Millisecond))
	defer poll.Stop()
	for {
		c.mu.Lock()
		ok, off, ch := c.shutdownOK, c.shutdownOffset, c.leaseCh
		c.mu.Unlock()
		if ok {
			if err := c.WaitForOffset(ctx, off); err != nil {
				return fmt.Errorf("controller client: controlled shutdown of broker %d: metadata offset %d: %w", c.cfg.NodeID, off, err)
			}
			c.log.Info("controlled shutdown complete", "metadata_offset", off, "took", time.Since(started))
			return nil
		}
		select {
		case <-ch:
		case <-poll.C:
			c.kickHeartbeat()
		case <-ctx.Done():
			return fmt.Errorf("controller client: controlled shutdown of broker %d: %w", c.cfg.NodeID, ctx.Err())
		case <-c.ctx.Done():
			return errors.New("controller client: closed")
		}
	}
}

// LeaseValid reports whether the broker is registered, the controller last said it is
// unfenced, and the lease that answer gave has not run out by this broker's clock.
func (c *BrokerClient) LeaseValid() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaseValidLocked()
}

func (c *BrokerClient) leaseValidLocked() bool {
	return c.epoch >= 0 && !c.fenced && !c.closing && time.Now().Before(c.leaseUntil)
}

// Fenced reports whether the last answer of the controller said this broker is fenced,
// or it has no registration (metadata.Store).
func (c *BrokerClient) Fenced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch < 0 || c.fenced || c.closing
}

// BrokerEpoch is the epoch of the current registration, -1 before one.
func (c *BrokerClient) BrokerEpoch() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// Incarnation identifies this process's registration.
func (c *BrokerClient) Incarnation() string { return c.incarnation }

func (c *BrokerClient) isFenced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fenced
}

func (c *BrokerClient) kickHeartbeat() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *BrokerClient) heartbeatLoop() {
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		c.heartbeat()
		select {
		case <-t.C:
		case <-c.kick:
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *BrokerClient) heartbeat() {
	if c.heartbeatsPaused.Load() {
		return
	}
	epoch := c.BrokerEpoch()
	req := &pb.BrokerHeartbeatRequest{BrokerId: c.cfg.NodeID, BrokerEpoch: epoch, MetadataOffset: c.Current().Offset,
		WantShutdown: c.shuttingDown.Load()}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.HeartbeatInterval)
	defer cancel()
	resp, err := send(ctx, c.q, c.cfg.HeartbeatInterval, pb.ControllerClient.BrokerHeartbeat, req)
	if err != nil {
		if c.ctx.Err() == nil {
			c.log.Debug("heartbeat failed", "err", err)
		}
		return
	}
	if err := fromPBError(resp.Error); err != nil {
		if errors.Is(err, kerr.StaleBrokerEpoch) || errors.Is(err, kerr.BrokerIDNotRegistered) {
			c.log.Warn("registration lost; registering again", "err", err)
			c.mu.Lock()
			c.fenced, c.leaseUntil = true, time.Time{}
			c.signalLeaseLocked()
			c.mu.Unlock()
			if err := c.register(c.ctx); err != nil {
				if c.ctx.Err() == nil {
					c.log.Warn("re-registration failed; retrying at the next heartbeat", "err", err)
				}
				return
			}
			c.kickHeartbeat()
			return
		}
		c.log.Warn("heartbeat refused", "err", err)
		return
	}
	lease := c.cfg.SessionTimeout
	if ms := time.Duration(resp.SessionTimeoutMs) * time.Millisecond; ms > 0 && ms < lease {
		lease = ms
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if req.WantShutdown && resp.ShouldShutDown && !c.shutdownOK {
		c.shutdownOK, c.shutdownOffset = true, resp.MetadataOffset
		c.signalLeaseLocked()
	}
	was := !c.fenced && time.Now().Before(c.leaseUntil)
	c.fenced = resp.Fenced
	if resp.Fenced {
		c.leaseUntil = time.Time{}
	} else {
		c.leaseUntil = sent.Add(lease)
	}
	if now := !c.fenced && time.Now().Before(c.leaseUntil); now != was {
		c.signalLeaseLocked()
		if now {
			c.log.Info("broker lease granted")
		} else {
			c.log.Warn("broker is fenced by the controller")
		}
	}
}
