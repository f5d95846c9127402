package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	pb "github.com/shalelog/shale/controller/proto"
)

// quorumConns holds a gRPC connection per controller and the best guess of which one is
// active: the last that answered, or the one a NotLeader answer named.
type quorumConns struct {
	mu     sync.Mutex
	addrs  []string
	conns  map[string]*grpc.ClientConn
	leader int // index into addrs
	closed bool
	creds  credentials.TransportCredentials
}

// newQuorumConns dials the controllers in plaintext, or with TLS when tlsCfg is set.
func newQuorumConns(addrs []string, tlsCfg *tls.Config) *quorumConns {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	return &quorumConns{addrs: slices.Clone(addrs), conns: map[string]*grpc.ClientConn{}, creds: creds}
}

// current returns the controller to try and a client for it.
func (q *quorumConns) current() (string, pb.ControllerClient, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return "", nil, errors.New("controller client closed")
	}
	addr := q.addrs[q.leader]
	cc := q.conns[addr]
	if cc == nil {
		var err error
		cc, err = grpc.NewClient(addr,
			grpc.WithTransportCredentials(q.creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize), grpc.MaxCallSendMsgSize(maxMessageSize)),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
			grpc.WithConnectParams(grpcConnectParams),
		)
		if err != nil {
			return "", nil, fmt.Errorf("controller %s: %w", addr, err)
		}
		q.conns[addr] = cc
	}
	return addr, pb.NewControllerClient(cc), nil
}

// moveTo makes addr (which a NotLeader answer named) the current controller.
func (q *quorumConns) moveTo(addr string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.addrs, addr)
	if i < 0 {
		q.addrs = append(q.addrs, addr)
		i = len(q.addrs) - 1
	}
	q.leader = i
}

// next moves on from addr to the following controller, unless another caller already did.
func (q *quorumConns) next(addr string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.addrs[q.leader] == addr {
		q.leader = (q.leader + 1) % len(q.addrs)
	}
}

func (q *quorumConns) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, cc := range q.conns {
		cc.Close()
	}
	q.conns = map[string]*grpc.ClientConn{}
}

// errQuorumUnreachable wraps the last failure when a call gives up.
var errQuorumUnreachable = errors.New("controller quorum unreachable")

// call runs fn against the active controller, following NotLeader answers and moving on
// from controllers that do not answer, until fn succeeds, fails with an answer that is
// not about leadership or transport, or ctx is done. Each attempt is bounded by attempt.
func (q *quorumConns) call(ctx context.Context, attempt time.Duration, fn func(context.Context, pb.ControllerClient) error) error {
	backoff := 20 * time.Millisecond
	var last error
	for {
		addr, client, err := q.current()
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, attempt)
		err = fn(actx, client)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w (last error: %v)", errQuorumUnreachable, ctx.Err(), last)
		}
		if hint, ok := notLeaderHint(err); ok && hint != "" && hint != addr {
			q.moveTo(hint)
			continue // straight to the leader it named
		} else if !ok && !retriable(err) {
			return err
		}
		q.next(addr)
		if !sleepCtx(ctx, backoff) {
			return fmt.Errorf("%w: %w (last error: %v)", errQuorumUnreachable, ctx.Err(), last)
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// retriable reports whether a gRPC failure may succeed on another try or controller.
func retriable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.ResourceExhausted, codes.Unknown:
		return true
	}
	return false
}

// grpcConnectParams keeps reconnection to a restarted controller quick: gRPC's default
// backoff grows to two minutes.
var grpcConnectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 2 * time.Second,
}

// controllerMethod is a unary method of the controller service as a method expression,
// such as pb.ControllerClient.CommitOffsets.
type controllerMethod[Req, Resp any] func(pb.ControllerClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// send calls method with req through the quorum (see quorumConns.call): retried across
// leader changes and unreachable controllers until it is answered or ctx is done, each
// attempt bounded by attempt. The error is the call's own; the answer's error fields
// are left to the caller.
func send[Req, Resp any](ctx context.Context, q *quorumConns, attempt time.Duration, method controllerMethod[Req, Resp], req Req) (Resp, error) {
	var resp Resp
	err := q.call(ctx, attempt, func(ctx context.Context, cl pb.ControllerClient) (err error) {
		resp, err = method(cl, ctx, req)
		return err
	})
	if err != nil {
		var zero Resp
		return zero, err
	}
	return resp, nil
}

// answer is a controller response with a call-wide error.
type answer interface{ GetError() *pb.Error }

// rpc calls method with req as send does, each attempt bounded by the request timeout,
// and returns the answer, or the call's error, or else the answer's own error.
func rpc[Req any, Resp answer](ctx context.Context, c *BrokerClient, method controllerMethod[Req, Resp], req Req) (Resp, error) {
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, method, req)
	if err == nil {
		err = fromPBError(resp.GetError())
	}
	if err != nil {
		var zero Resp
		return zero, err
	}
	return resp, nil
}

// perItem maps a controller's answer of one result per item asked about, in order, with
// conv; an answer with another number of results is an error for the whole call (what
// names the items in it).
func perItem[R, T any](what string, n int, results []R, conv func(R) T) ([]T, error) {
	if len(results) != n {
		return nil, fmt.Errorf("controller answered %d results for %d %s", len(results), n, what)
	}
	out := make([]T, n)
	for i, r := range results {
		out[i] = conv(r)
	}
	return out, nil
}

func errorList(n int, errs []*pb.Error, err error) []error {
	out := make([]error, n)
	if err == nil && len(errs) != n {
		err = fmt.Errorf("controller answered %d results for %d requests", len(errs), n)
	}
	for i := range out {
		if err != nil {
			out[i] = err
		} else {
			out[i] = fromPBError(errs[i])
		}
	}
	return out
}
