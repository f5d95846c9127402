package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleApiVersions answers with every registered API. A version newer than Shale serves
// gets a v0-format response with UNSUPPORTED_VERSION that lists ApiVersions' own range
// (KIP-511), as Kafka's does, so that the client retries at a version both sides know:
// only that answer carries the features (v3+), which clients such as franz-go otherwise
// never see when they are given the whole list in the v0 format.
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
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: kmsg.ApiVersions.Int16(), MinVersion: h.min, MaxVersion: h.max}}
		return Result{Resp: resp}
	}
	resp.Version = r.Version
	if r.Version >= 3 && !validClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion) {
		resp.ErrorCode = 42 // INVALID_REQUEST, as Kafka answers a malformed client software name
		resp.ApiKeys = s.supportedKeys()
		return Result{Resp: resp}
	}
	resp.ApiKeys = s.supportedKeys()
	s.features(resp)
	return Result{Resp: resp}
}

// transactionVersionFeature is the feature KIP-890 part 2 is finalized under.
const transactionVersionFeature = "transaction.version"

// features fills the v3+ feature fields: Shale supports transaction.version 0-2 and
// finalizes the configured level. A client learns transactions v2 from the finalized
// level, never from the API versions alone (Kafka's design), so a level below 2 keeps
// clients on version 1 even where they could send the newer requests.
func (s *Server) features(resp *kmsg.ApiVersionsResponse) {
	if resp.Version < 3 {
		return
	}
	// Java clients before Kafka 3.9 fail on a supported feature whose minimum is 0:
	// Kafka lists those only from v4 (KAFKA-17011, KAFKA-17492).
	if resp.Version >= 4 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, 2
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	// Kafka's epoch is the metadata offset the features were read at; clients keep the
	// features of the highest epoch they saw. -1 would mean "none finalized". A server
	// without a replica manager (the golden tests' broker setups) has no metadata: 0.
	resp.FinalizedFeaturesEpoch = 0
	if s.deps.Replicas != nil {
		if im := s.image(); im != nil {
			resp.FinalizedFeaturesEpoch = int64(im.Offset)
		}
	}
	if lvl := s.cfg.TransactionVersion; lvl > 0 {
		// Kafka lists a finalized feature only above level 0.
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, lvl, lvl
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
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

// apiVersionsAPI: v0 for kafka-python and kafkajs' fallbacks; v4 has v3's format and is
// the version Kafka lists supported features with minimum 0 in (transaction.version). A
// client asking at v5+ (franz-go) gets the v0-format UNSUPPORTED_VERSION answer with
// ApiVersions' own range and retries at v4 (KIP-511). dispatch answers ApiVersions
// itself, before any version check, so it has no error builder.
var apiVersionsAPI = api{key: kmsg.ApiVersions, min: 0, max: 4, handle: (*Server).handleApiVersions}
