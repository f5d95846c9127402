package console

import (
	"context"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"
)

// peersTTL is how long a discovered peer list is used before it is asked for again.
const peersTTL = 30 * time.Second

// peerCache holds the last discovered peers.
type peerCache struct {
	mu    sync.Mutex
	at    time.Time
	peers []string
}

// peers returns the other nodes' console base URLs: Options.Peers when set; else, with
// Options.NodeID set, discovered through the Kafka API: each other broker's own
// DescribeConfigs answer names its http.listener and console.enable (a wildcard host is
// replaced by the broker's advertised Kafka host).
func (c *Console) peers(ctx context.Context) []string {
	if c.opts.Peers != nil {
		return c.opts.Peers()
	}
	if !c.opts.DiscoverPeers {
		return nil
	}
	pc := &c.peerCache
	pc.mu.Lock()
	defer pc.mu.Unlock()
	now := c.clock.Now()
	if !pc.at.IsZero() && now.Sub(pc.at) < peersTTL {
		return pc.peers
	}
	_, adm, err := c.service.get()
	if err != nil {
		return pc.peers
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		c.lg.Debug("console peers", "err", err)
		return pc.peers
	}
	var peers []string
	for _, b := range brokers {
		if b.NodeID == c.opts.NodeID {
			continue
		}
		rcs, err := adm.DescribeBrokerConfigs(ctx, b.NodeID)
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			continue
		}
		var listener string
		enabled := true
		for _, cf := range rcs[0].Configs {
			if cf.Value == nil {
				continue
			}
			switch cf.Key {
			case "http.listener":
				listener = *cf.Value
			case "console.enable":
				enabled, _ = strconv.ParseBool(*cf.Value)
			}
		}
		host, port, err := net.SplitHostPort(listener)
		if listener == "" || !enabled || err != nil {
			continue
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = b.Host
		}
		peers = append(peers, "http://"+net.JoinHostPort(host, port))
	}
	sort.Strings(peers)
	pc.at, pc.peers = now, peers
	return peers
}
