package txn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// BrokerClients sends the coordinator's requests to other brokers over the inter-broker
// listener (WriteTxnMarkers to partition leaders, and KIP-890's VerifyOnly
// AddPartitionsToTxn to coordinators): one franz-go client per broker, as the replica
// fetchers connect, with the same options (the inter-broker listener's TLS and SASL).
type BrokerClients struct {
	nodeID int32
	opts   []kgo.Opt

	mu      sync.Mutex
	closed  bool
	clients map[brokerKey]*kgo.Client
}

type brokerKey struct {
	id   int32
	addr string
}

// NewBrokerClients returns clients that connect with opts.
func NewBrokerClients(nodeID int32, opts ...kgo.Opt) *BrokerClients {
	return &BrokerClients{nodeID: nodeID, opts: opts, clients: map[brokerKey]*kgo.Client{}}
}

func (bc *BrokerClients) client(b metadata.Broker) (*kgo.Client, error) {
	k := brokerKey{b.ID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))}
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.closed {
		return nil, errors.New("broker clients closed")
	}
	if cl := bc.clients[k]; cl != nil {
		return cl, nil
	}
	// A broker that registered anew at another address leaves its old client behind.
	for old, cl := range bc.clients {
		if old.id == b.ID {
			cl.Close()
			delete(bc.clients, old)
		}
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(k.addr),
		kgo.ClientID(fmt.Sprintf("shale-txn-coordinator-%d", bc.nodeID)),
		kgo.DialTimeout(5 * time.Second),
		kgo.WithLogger(nil),
	}, bc.opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client for broker %d: %w", b.ID, err)
	}
	bc.clients[k] = cl
	return cl, nil
}

// request sends req to b itself: the seed broker, never another one the client
// discovers.
func (bc *BrokerClients) request(ctx context.Context, b metadata.Broker, req kmsg.Request) (kmsg.Response, error) {
	cl, err := bc.client(b)
	if err != nil {
		return nil, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no connection to broker %d", b.ID)
	}
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("request to broker %d: %w", b.ID, err)
	}
	return resp, nil
}

// WriteTxnMarkers sends req to the leader to.
func (bc *BrokerClients) WriteTxnMarkers(ctx context.Context, to metadata.Broker, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	resp, err := bc.request(ctx, to, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// AddPartitionsToTxn sends req to the coordinator to.
func (bc *BrokerClients) AddPartitionsToTxn(ctx context.Context, to metadata.Broker, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	resp, err := bc.request(ctx, to, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AddPartitionsToTxnResponse), nil
}

// Close closes every client.
func (bc *BrokerClients) Close() {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.closed = true
	for k, cl := range bc.clients {
		cl.Close()
		delete(bc.clients, k)
	}
}
