package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handlePushTelemetry takes a client's pushed metrics (KIP-714) and exports them on this
// broker's /metrics (internal/telemetry).
func (s *Server) handlePushTelemetry(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	err := s.cfg.Telemetry.Push(s.image().ClientMetrics, req.ClientInstanceID, telemetryClient(r), req.SubscriptionID,
		req.Terminating, req.CompressionType, req.Metrics)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		s.lg.Debug("push telemetry refused", "client_id", r.ClientID, "err", err)
	}
	return Result{Resp: resp}
}

// pushTelemetryAPI: KIP-714, every version kmsg knows; needs as GetTelemetrySubscriptions.
var pushTelemetryAPI = api{key: kmsg.PushTelemetry, min: 0, max: 0, handle: (*Server).handlePushTelemetry, needs: needClientMetrics | needTelemetry}
