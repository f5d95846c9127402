package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/server/config"
	"github.com/shalelog/shale/server/console"
)

// newConsole builds the web console of a broker, dialling the node's own Kafka listener:
// a SASL one when the node has any (viewers then log in, and see and do what their own
// ACLs allow), else the inter-broker listener. nil when console.enable is false or the
// node is no broker (a controller alone has no Kafka listener to read the cluster by).
func (n *node) newConsole() (*console.Console, error) {
	cfg := n.cfg
	if !cfg.ConsoleEnable || !cfg.IsBroker() {
		return nil, nil
	}
	l, ok := consoleListener(cfg)
	if !ok {
		return nil, nil
	}
	proto := cfg.SecurityProtocol(l.Name)
	host := l.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	k := console.Kafka{Addr: net.JoinHostPort(host, strconv.Itoa(l.Port))}
	if isTLS(proto) && n.sec.tls != nil {
		// Viewers' connections verify the broker but present no certificate: on an SSL
		// listener the broker's own would make every viewer the broker's principal. They
		// are then User:ANONYMOUS, or refused where ssl.client.auth=required. The
		// sampler, which shows a viewer only what its own client can describe, presents
		// the node's certificate.
		k.Opts = append(k.Opts, kgo.Dialer(n.anonymousTLSDial))
		k.ServiceOpts = append(k.ServiceOpts, kgo.Dialer(n.sec.tlsDial))
	}
	if isSASL(proto) {
		k.SASL = true
		k.Mechanisms = cfg.SASLEnabledMechanisms
		// The sampler reads as the node itself; pages show what it sampled only for the
		// topics and groups the viewer's own client may describe.
		k.ServiceOpts = append(k.ServiceOpts, kgo.SASL(n.sec.interBrokerMechanism()))
	}
	opts := console.Options{Kafka: k, ReadOnly: cfg.ConsoleReadOnly, Logger: n.lg, NodeID: cfg.NodeID, DiscoverPeers: true,
		SchemaRegistry: n.schemaRegistryImage}
	if k.SASL {
		// The history names topics and groups: on a cluster that authenticates, only the
		// other nodes may read it. They share the inter-broker login, so each derives the
		// same token from it without the password crossing the (plain HTTP) listener.
		mac := hmac.New(sha256.New, []byte(cfg.SASLInterBrokerUsername+"\x00"+cfg.SASLInterBrokerPassword))
		mac.Write([]byte("shale console history"))
		opts.PeerToken = hex.EncodeToString(mac.Sum(nil))
	}
	return console.New(opts)
}

// schemaRegistryImage is the built-in schema registry's state in the broker's current
// metadata image; nil before the broker has registered.
func (n *node) schemaRegistryImage() *metadata.SchemaRegistry {
	bc := n.registered.Load()
	if bc == nil {
		return nil
	}
	im := bc.Current()
	if im == nil {
		return nil
	}
	return im.SchemaRegistry
}

// consoleListener picks the Kafka listener the console dials: the first SASL one, so
// that a cluster requiring authentication makes the console ask for it too; else the
// inter-broker listener.
func consoleListener(cfg *config.Config) (config.Listener, bool) {
	for _, l := range cfg.BrokerListeners() {
		if isSASL(cfg.SecurityProtocol(l.Name)) {
			return l, true
		}
	}
	return findBrokerListener(cfg, cfg.InterBrokerListenerName)
}

// anonymousTLSDial dials a broker over TLS verifying its certificate as the node's
// clients do, without presenting one.
func (n *node) anonymousTLSDial(ctx context.Context, network, host string) (net.Conn, error) {
	cfg := n.sec.tls.ClientConfig()
	cfg.GetClientCertificate = nil
	if h, _, err := net.SplitHostPort(host); err == nil {
		cfg.ServerName = h
	}
	d := &tls.Dialer{Config: cfg}
	return d.DialContext(ctx, network, host)
}
