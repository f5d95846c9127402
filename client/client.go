package client

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options says how to reach a cluster and how to produce. The zero value connects to
// localhost:9092 with franz-go's producer defaults (acks=all, idempotent).
type Options struct {
	// Brokers are the bootstrap servers, host:port each (default localhost:9092).
	Brokers []string
	// ClientID is sent in every request (default "shale").
	ClientID string
	// DialTimeout bounds each connection attempt (default: franz-go's, 10s).
	DialTimeout time.Duration
	// RequestTimeout is how long the broker may take over an admin request such as
	// CreateTopics, sent in the request itself (default 15s).
	RequestTimeout time.Duration

	// Acks is what a produce waits for: "all" (or "-1", the default), "1" (the leader)
	// or "0" (nothing). Anything but all turns off idempotent writes, which need acks=all.
	Acks string
	// Compression is the batch codec: none, gzip, snappy, lz4 or zstd; "" keeps
	// franz-go's default (snappy).
	Compression string
	// ManualPartitions sends each record to the partition in its Partition field rather
	// than hashing its key.
	ManualPartitions bool
	// DeliveryTimeout bounds how long a record may wait to be acknowledged, retries
	// included (default: no limit, as in franz-go; the produce's context still applies).
	DeliveryTimeout time.Duration

	// Security connects to TLS and SASL listeners.
	Security Security

	// Extra are further franz-go options, applied last.
	Extra []kgo.Opt
}

// Client is a connection to a cluster for admin requests and producing.
type Client struct {
	kc  *kgo.Client
	adm *kadm.Client
}

// New makes a client. It does not connect until the first request.
func New(o Options) (*Client, error) {
	opts, err := o.kgoOpts()
	if err != nil {
		return nil, err
	}
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return newClient(kc, o), nil
}

func newClient(kc *kgo.Client, o Options) *Client {
	adm := kadm.NewClient(kc)
	if o.RequestTimeout > 0 {
		adm.SetTimeoutMillis(int32(min(o.RequestTimeout.Milliseconds(), 1<<31-1)))
	}
	return &Client{kc: kc, adm: adm}
}

// Kgo is the underlying franz-go client.
func (c *Client) Kgo() *kgo.Client { return c.kc }

// Admin is the underlying franz-go admin client.
func (c *Client) Admin() *kadm.Client { return c.adm }

// Close closes the connections; buffered records not yet flushed are failed.
func (c *Client) Close() { c.kc.Close() }

func (o Options) kgoOpts() ([]kgo.Opt, error) {
	brokers := o.Brokers
	if len(brokers) == 0 {
		brokers = []string{"localhost:9092"}
	}
	clientID := o.ClientID
	if clientID == "" {
		clientID = "shale"
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID(clientID)}
	if o.DialTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(o.DialTimeout))
	}
	acks, err := ParseAcks(o.Acks)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.RequiredAcks(acks))
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if o.Compression != "" {
		codec, err := ParseCompression(o.Compression)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.ProducerBatchCompression(codec))
	}
	if o.ManualPartitions {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if o.DeliveryTimeout > 0 {
		opts = append(opts, kgo.RecordDeliveryTimeout(o.DeliveryTimeout))
	}
	sec, err := o.Security.KgoOpts()
	if err != nil {
		return nil, err
	}
	opts = append(opts, sec...)
	return append(opts, o.Extra...), nil
}

// ParseAcks reads an acks setting as Kafka's tools write it: all or -1, 1, 0; "" is all.
func ParseAcks(s string) (kgo.Acks, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "all", "-1":
		return kgo.AllISRAcks(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "0":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, fmt.Errorf("acks %q: want all, -1, 1 or 0", s)
}

// ParseCompression reads a codec name: none (or uncompressed), gzip, snappy, lz4, zstd.
func ParseCompression(s string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none", "uncompressed":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", s)
}
