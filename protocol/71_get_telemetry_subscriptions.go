package protocol

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/protocol/telemetry"
)

// telemetryClient is what KIP-714's match selectors see of the client behind r.
func telemetryClient(r *Request) telemetry.Client {
	c := telemetry.Client{ClientID: r.ClientID}
	if r.Remote != nil {
		if host, port, err := net.SplitHostPort(r.Remote.String()); err == nil {
			c.SourceAddress, c.SourcePort = host, port
		}
	}
	if r.conn != nil {
		if sw := r.conn.software.Load(); sw != nil {
			c.SoftwareName, c.SoftwareVersion = sw.name, sw.version
		}
	}
	return c
}

func (s *Server) handleGetTelemetrySubscriptions(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	sub, err := s.cfg.Telemetry.GetSubscription(s.image().ClientMetrics, req.ClientInstanceID, telemetryClient(r))
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return Result{Resp: resp}
	}
	// The id goes back on every answer, not only a newly assigned one: franz-go and the
	// Java client take whatever the broker answers as their id.
	resp.ClientInstanceID = sub.InstanceID
	resp.SubscriptionID = sub.ID
	resp.AcceptedCompressionTypes = sub.Compression
	resp.PushIntervalMillis = sub.IntervalMs
	resp.TelemetryMaxBytes = sub.MaxBytes
	resp.DeltaTemporality = sub.DeltaTemporality
	resp.RequestedMetrics = sub.Metrics
	if resp.RequestedMetrics == nil {
		resp.RequestedMetrics = []string{}
	}
	return Result{Resp: resp}
}

// getTelemetrySubscriptionsAPI: KIP-714, every version kmsg knows, when the broker has
// client telemetry and a metadata store that keeps subscriptions: with a store that
// keeps none every client would be told to push nothing, which is what a broker without
// the API achieves too.
var getTelemetrySubscriptionsAPI = api{key: kmsg.GetTelemetrySubscriptions, min: 0, max: 0, handle: (*Server).handleGetTelemetrySubscriptions, needs: needClientMetrics | needTelemetry}
