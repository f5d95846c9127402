package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleApiVersions answers with every registered API. A version newer than Shale serves
// gets a v0-format response with UNSUPPORTED_VERSION that still lists the ranges
// (KIP-511), so that the client retries at a version both sides know.
func (s *Server) handleApiVersions(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ApiVersionsRequest)
	h := s.handlers[kmsg.ApiVersions.Int16()]
	resp := kmsg.NewPtrApiVersionsResponse()
	// The client software fields are kept for KIP-714's matching even from a request
	// answered with UNSUPPORTED_VERSION: franz-go asks at v5 once and uses the key list
	// it gets back without asking again.
	if r.Version >= 3 && r.conn != nil && req.ClientSoftwareName != "" && validClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion) {
		r.conn.software.Store(&clientSoftware{req.ClientSoftwareName, req.ClientSoftwareVersion})
	}
	if r.Version > h.max || r.Version < h.min {
		resp.Version = 0
		resp.ErrorCode = codeUnsupportedVersion
		resp.ApiKeys = s.supportedKeys()
		return Result{Resp: resp}
	}
	resp.Version = r.Version
	if r.Version >= 3 && !validClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion) {
		resp.ErrorCode = 42 // INVALID_REQUEST, as Kafka answers a malformed client software name
		resp.ApiKeys = s.supportedKeys()
		return Result{Resp: resp}
	}
	resp.ApiKeys = s.supportedKeys()
	return Result{Resp: resp}
}

// validClientSoftware applies KIP-511's pattern to the client's self-description:
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?. Empty strings are allowed, as clients that
// predate the fields send them.
func validClientSoftware(name, version string) bool {
	for _, s := range []string{name, version} {
		if s == "" {
			continue
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
			if !alnum && ((c != '-' && c != '.') || i == 0 || i == len(s)-1) {
				return false
			}
		}
	}
	return true
}

// apiVersionsAPI: v0 for kafka-python and kafkajs' fallbacks. A client asking at v4+
// (franz-go) gets the v0-format UNSUPPORTED_VERSION answer with the ranges and retries
// at v3 (KIP-511). dispatch answers ApiVersions itself, before any version check, so it
// has no error builder.
var apiVersionsAPI = api{key: kmsg.ApiVersions, min: 0, max: 3, handle: (*Server).handleApiVersions}
