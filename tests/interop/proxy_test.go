package interop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// produceKey is the Kafka API key of Produce.
const produceKey = 0

// faultPolicy decides, for the n-th Produce response a proxy sees (counting from 1),
// whether to cut the connection instead of delivering it, or to hold it back first.
type faultPolicy struct {
	// cutEvery cuts the connection at every cutEvery-th Produce response (0: never):
	// the broker has appended the batch, the client never hears so and must retry.
	cutEvery int
	// stallEvery holds every stallEvery-th Produce response for stallFor before
	// delivering it (0: never), long enough for the client to time the request out,
	// drop the connection and retry while the broker has already appended.
	stallEvery int
	stallFor   time.Duration
	// maxFaults bounds the faults injected, so that every run makes progress.
	maxFaults int
}

// faultProxy is a Kafka-aware TCP proxy in front of one broker. It forwards bytes both
// ways unchanged but reads the framing: requests tell it which correlation ids are
// Produce requests, so that it can drop exactly Produce responses.
type faultProxy struct {
	upstream string
	policy   faultPolicy
	ln       net.Listener

	mu        sync.Mutex
	produces  int // Produce responses seen
	faults    int // faults injected
	cuts      int
	stalls    int
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
	closeOnce sync.Once
}

func newFaultProxy(upstream string, policy faultPolicy) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{upstream: upstream, policy: policy, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

// stats returns how many Produce responses passed and how many faults of each kind were
// injected.
func (p *faultProxy) stats() (produces, cuts, stalls int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.produces, p.cuts, p.stalls
}

// Close stops accepting, closes every proxied connection and waits for the proxy's
// goroutines.
func (p *faultProxy) Close() {
	p.closeOnce.Do(func() {
		p.ln.Close()
		p.mu.Lock()
		p.closed = true
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}

func (p *faultProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *faultProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			client.Close()
			server.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(client, server)
	}
}

// serve proxies one connection until either side closes or a fault cuts it.
func (p *faultProxy) serve(client, server net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client, server)
	var (
		mu      sync.Mutex
		pending = map[int32]int16{} // correlation id -> API key
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Requests: size, api key, api version, correlation id, ...
		_ = forwardFrames(server, client, func(frame []byte) (bool, error) {
			if len(frame) < 12 {
				return false, errors.New("short request header")
			}
			mu.Lock()
			pending[int32(binary.BigEndian.Uint32(frame[8:12]))] = int16(binary.BigEndian.Uint16(frame[4:6]))
			mu.Unlock()
			return true, nil
		})
		server.Close()
		client.Close()
	}()
	// Responses: size, correlation id, ...
	_ = forwardFrames(client, server, func(frame []byte) (bool, error) {
		if len(frame) < 8 {
			return false, errors.New("short response header")
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:8]))
		mu.Lock()
		key, ok := pending[corr]
		delete(pending, corr)
		mu.Unlock()
		if !ok || key != produceKey {
			return true, nil
		}
		return p.onProduceResponse(), nil
	})
	client.Close()
	server.Close()
	<-done
}

// onProduceResponse applies the policy to the next Produce response; false cuts the
// connection.
func (p *faultProxy) onProduceResponse() bool {
	p.mu.Lock()
	p.produces++
	n := p.produces
	budget := p.faults < p.policy.maxFaults
	cut := budget && p.policy.cutEvery > 0 && n%p.policy.cutEvery == 0
	stall := budget && !cut && p.policy.stallEvery > 0 && n%p.policy.stallEvery == 0
	if cut {
		p.faults++
		p.cuts++
	}
	if stall {
		p.faults++
		p.stalls++
	}
	p.mu.Unlock()
	if stall {
		time.Sleep(p.policy.stallFor)
	}
	return !cut
}

// forwardFrames copies size-prefixed Kafka frames from src to dst, asking inspect about
// each one first; a false answer or an error stops the copy.
func forwardFrames(dst io.Writer, src io.Reader, inspect func(frame []byte) (bool, error)) error {
	var size [4]byte
	for {
		if _, err := io.ReadFull(src, size[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > 128<<20 {
			return fmt.Errorf("frame of %d bytes", n)
		}
		frame := make([]byte, 4+n)
		copy(frame, size[:])
		if _, err := io.ReadFull(src, frame[4:]); err != nil {
			return err
		}
		ok, err := inspect(frame)
		if err != nil || !ok {
			return err
		}
		if _, err := dst.Write(frame); err != nil {
			return err
		}
	}
}

// proxyDialer sends every broker connection of a franz-go client through a fault proxy
// of its own, started on first use; Close closes them all.
type proxyDialer struct {
	policy  faultPolicy
	mu      sync.Mutex
	proxies map[string]*faultProxy
}

func newProxyDialer(policy faultPolicy) *proxyDialer {
	return &proxyDialer{policy: policy, proxies: map[string]*faultProxy{}}
}

func (d *proxyDialer) DialContext(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	p, ok := d.proxies[host]
	if !ok {
		var err error
		if p, err = newFaultProxy(host, d.policy); err != nil {
			d.mu.Unlock()
			return nil, err
		}
		d.proxies[host] = p
	}
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, p.addr())
}

// stats sums the proxies' counters.
func (d *proxyDialer) stats() (produces, cuts, stalls int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.proxies {
		a, b, c := p.stats()
		produces, cuts, stalls = produces+a, cuts+b, stalls+c
	}
	return
}

func (d *proxyDialer) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.proxies {
		p.Close()
	}
}
