package restproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/acl"
	"github.com/shalelog/shale/security/httpauth"
	"github.com/shalelog/shale/server/schemaregistry"
)

// Images is where the proxy reads cluster metadata and the schema registry's state: the
// broker's metadata cache.
type Images interface {
	Current() *metadata.Image
	Watch(ctx context.Context) <-chan *metadata.Image
}

// Options configure a Server.
type Options struct {
	Images Images
	// Kafka are the options that reach this node's Kafka listener: at least
	// kgo.SeedBrokers, and the dialer and SASL mechanism the listener needs.
	Kafka []kgo.Opt
	// Authorizer checks the HTTP principal's operations with the cluster's ACLs; nil
	// when no authorizer is configured (every operation is allowed, as in Kafka).
	Authorizer *acl.Authorizer
	// Wrap, when set, wraps the API's handler: the HTTP authentication middleware that
	// puts the principal in the request's context (httpauth.WithPrincipal).
	Wrap func(http.Handler) http.Handler
	Log  *slog.Logger
	// Timeout bounds a produce, a topic change and a read; 0 means 30s.
	Timeout time.Duration
	// Registerer, when set, gets the proxy's metrics.
	Registerer prometheus.Registerer
	// Links, when set, serves the cluster link and mirror topic routes (links.go): the
	// broker's metadata store.
	Links metadata.LinkStore
	// MaxBodyBytes bounds a produce request's body, and half of it each record of a
	// streamed one; 0 means 64 MiB.
	MaxBodyBytes int64
}

// Server serves the proxy's API.
type Server struct {
	images  Images
	authz   *acl.Authorizer
	log     *slog.Logger
	timeout time.Duration
	maxBody int64
	kafka   []kgo.Opt
	serde   *schemaregistry.Serde
	// client produces records and changes topics for every request: acks=all and
	// idempotent, as kgo's defaults are.
	client  *kgo.Client
	adm     *kadm.Client
	handler http.Handler
	metrics *metrics
	// linkStore changes cluster links and mirrors; nil without Options.Links.
	linkStore metadata.LinkStore
}

// metrics are the proxy's Prometheus series.
type metrics struct {
	requests *prometheus.CounterVec   // route, code
	latency  *prometheus.HistogramVec // route
	records  *prometheus.CounterVec   // result: the record's error_code
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shale", Subsystem: "rest_proxy", Name: "requests_total",
			Help: "REST proxy requests, by route and HTTP status."}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "shale", Subsystem: "rest_proxy", Name: "request_duration_seconds",
			Help: "Time from a REST proxy request's headers to the end of its response, by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14)}, []string{"route"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shale", Subsystem: "rest_proxy", Name: "produced_records_total",
			Help: "Records produced through the REST proxy, by outcome (error_code: 200 delivered)."}, []string{"error_code"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.records)
	}
	return m
}

// statusWriter remembers the status a handler wrote; Unwrap keeps
// http.ResponseController (flushes, full duplex) working through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Error codes of Confluent REST Proxy (io.confluent.rest.exceptions.KafkaExceptionMapper
// and kafka-rest's v3 exceptions, whose generic codes are the HTTP status itself).
const (
	codeBadRequest      = 400
	codeNotFound        = 404
	codeKafkaBadRequest = 40002
	codeAuthentication  = 40101
	codeAuthorization   = 40301
	codeUnknownTopic    = 40403
	codeTooLarge        = 413
	codeUnsupportedType = 415
	codeJSONConversion  = 42203 // Confluent: "Conversion of JSON to Avro failed."
	codeTooManyRequests = 42901
	codeKafkaError      = 50002
	codeKafkaRetriable  = 50003
	codeInternal        = 500
)

// New returns a Server. Its Kafka client dials nothing until the first request needs it.
func New(o Options) (*Server, error) {
	s := &Server{images: o.Images, authz: o.Authorizer, log: o.Log, timeout: o.Timeout, kafka: o.Kafka, serde: schemaregistry.NewSerde(),
		linkStore: o.Links}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	s.metrics = newMetrics(o.Registerer)
	if s.maxBody = o.MaxBodyBytes; s.maxBody <= 0 {
		s.maxBody = defaultMaxBody
	}
	opts := append(slices.Clone(o.Kafka),
		kgo.ClientID("shale-rest-proxy"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(&partitioner{inner: kgo.StickyKeyPartitioner(nil)}),
		kgo.ProducerLinger(0),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("rest proxy: kafka client: %w", err)
	}
	s.client, s.adm = cl, kadm.NewClient(cl)
	mux := http.NewServeMux()
	for pattern, h := range map[string]func(http.ResponseWriter, *http.Request) error{
		"GET /v3/clusters":                                                         s.listClusters,
		"GET /v3/clusters/{cluster}":                                               s.getCluster,
		"GET /v3/clusters/{cluster}/topics":                                        s.listTopics,
		"POST /v3/clusters/{cluster}/topics":                                       s.createTopic,
		"GET /v3/clusters/{cluster}/topics/{topic}":                                s.getTopic,
		"DELETE /v3/clusters/{cluster}/topics/{topic}":                             s.deleteTopic,
		"GET /v3/clusters/{cluster}/topics/{topic}/configs":                        s.listTopicConfigs,
		"GET /v3/clusters/{cluster}/topics/{topic}/partitions":                     s.listPartitions,
		"GET /v3/clusters/{cluster}/topics/{topic}/partitions/{partition}":         s.getPartition,
		"POST /v3/clusters/{cluster}/topics/{topic}/records":                       s.produce,
		"GET /v3/clusters/{cluster}/topics/{topic}/partitions/{partition}/records": s.readRecords,
		"POST /v3/clusters/{cluster}/links":                                        s.createLink,
		"GET /v3/clusters/{cluster}/links":                                         s.listLinks,
		"GET /v3/clusters/{cluster}/links/{link}":                                  s.getLink,
		"DELETE /v3/clusters/{cluster}/links/{link}":                               s.deleteLink,
		"POST /v3/clusters/{cluster}/links/{link}/mirrors":                         s.createMirror,
		"GET /v3/clusters/{cluster}/links/{link}/mirrors":                          s.listMirrors,
		"POST /v3/clusters/{cluster}/links/{link}/mirrors:promote":                 s.promoteMirrors(false),
		"POST /v3/clusters/{cluster}/links/{link}/mirrors:failover":                s.promoteMirrors(true),
	} {
		mux.Handle(pattern, s.wrap(pattern, h))
	}
	for pattern, h := range s.remoteLogRoutes() {
		mux.Handle(pattern, s.wrap(pattern, h))
	}
	mux.Handle("/", s.wrap("other", func(http.ResponseWriter, *http.Request) error {
		return errorf(codeNotFound, "HTTP 404 Not Found")
	}))
	s.handler = mux
	if o.Wrap != nil {
		s.handler = o.Wrap(mux)
	}
	return s, nil
}

// Handler returns the API's handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Close closes the proxy's Kafka client; requests in flight fail.
func (s *Server) Close() { s.client.Close() }

// Serve serves the API on ln until ctx is done, then shuts down gracefully and closes
// the Kafka client.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	defer s.Close()
	return httpauth.Serve(ctx, ln, s.handler, s.log, "rest proxy")
}

// apiError is an error answered with Confluent's error body.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// status maps an error code to its HTTP status: the first three digits of a five-digit
// code, else the code itself.
func status(code int) int {
	if code >= 10000 {
		return code / 100
	}
	return code
}

func reply(w http.ResponseWriter, code int, body any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if body == nil {
		return nil
	}
	return json.NewEncoder(w).Encode(body)
}

func errorBody(e *apiError) map[string]any {
	return map[string]any{"error_code": e.code, "message": e.msg}
}

func (s *Server) wrap(route string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	latency := s.metrics.latency.WithLabelValues(route)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: rw}
		defer func() {
			latency.Observe(time.Since(start).Seconds())
			s.metrics.requests.WithLabelValues(route, strconv.Itoa(w.code)).Inc()
		}()
		defer func() {
			// A bug in a handler must not take the broker down.
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("rest proxy handler panicked", "path", r.URL.Path, "panic", p)
				_ = reply(w, 500, errorBody(errorf(codeInternal, "internal error")))
			}
		}()
		err := h(w, r)
		if err == nil {
			return
		}
		ae := toAPIError(err)
		if status(ae.code) >= 500 {
			s.log.Warn("rest proxy request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		_ = reply(w, status(ae.code), errorBody(ae))
	})
}

// toAPIError maps an error to Confluent's code for it: Kafka errors as Confluent's
// KafkaExceptionMapper maps the Java client's exceptions.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var re *metadata.RegistryError
	if errors.As(err, &re) {
		return &apiError{code: re.Code, msg: re.Message}
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		msg := ke.Message + ": " + ke.Description
		if err.Error() != ke.Error() {
			msg = err.Error()
		}
		switch ke {
		case kerr.UnknownTopicOrPartition:
			return &apiError{code: codeUnknownTopic, msg: "This server does not host this topic-partition."}
		case kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed, kerr.GroupAuthorizationFailed:
			return &apiError{code: codeAuthorization, msg: msg}
		case kerr.SaslAuthenticationFailed, kerr.IllegalSaslState, kerr.UnsupportedSaslMechanism:
			return &apiError{code: codeAuthentication, msg: msg}
		case kerr.ThrottlingQuotaExceeded:
			return &apiError{code: codeTooManyRequests, msg: msg}
		case kerr.MessageTooLarge, kerr.RecordListTooLarge:
			return &apiError{code: codeTooLarge, msg: msg}
		}
		if ke.Retriable {
			return &apiError{code: codeKafkaRetriable, msg: msg}
		}
		// A record or request the broker refused (INVALID_RECORD from schema ID
		// validation, TOPIC_ALREADY_EXISTS, INVALID_CONFIG, POLICY_VIOLATION, ...): the
		// client's to fix, as Confluent answers these ApiExceptions.
		return &apiError{code: codeKafkaBadRequest, msg: msg}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &apiError{code: codeKafkaRetriable, msg: "timed out: " + err.Error()}
	}
	if errors.Is(err, context.Canceled) {
		return &apiError{code: codeKafkaRetriable, msg: "cancelled: " + err.Error()}
	}
	return &apiError{code: codeKafkaError, msg: err.Error()}
}

// image returns the broker's current metadata image.
func (s *Server) image() *metadata.Image {
	if im := s.images.Current(); im != nil {
		return im
	}
	return &metadata.Image{}
}

// cluster checks the path's cluster id against this cluster's.
func (s *Server) cluster(r *http.Request) (*metadata.Image, error) {
	im := s.image()
	if c := r.PathValue("cluster"); c != im.ClusterID {
		return nil, errorf(codeNotFound, "Cluster %s cannot be found.", c)
	}
	return im, nil
}

// authorize checks that the request's principal may perform op on the resource.
func (s *Server) authorize(r *http.Request, im *metadata.Image, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) error {
	if s.authz == nil {
		return nil
	}
	set := im.ACLs
	if set == nil {
		set = acl.NewSet(nil)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	principal := httpauth.Principal(r.Context())
	if s.authz.Authorize(set, principal, host, op, typ, name) {
		return nil
	}
	what := "Topic"
	if typ == kmsg.ACLResourceTypeCluster {
		what = "Cluster"
	}
	return errorf(codeAuthorization, "Not authorized to access %s: %s may not %s %s %q", strings.ToLower(what)+"s", principal, op, what, name)
}

// topic finds the path's topic after checking the cluster and that the principal may
// perform op on it.
func (s *Server) topic(r *http.Request, op kmsg.ACLOperation) (*metadata.Image, *metadata.Topic, error) {
	im, err := s.cluster(r)
	if err != nil {
		return nil, nil, err
	}
	name := r.PathValue("topic")
	if err := s.authorize(r, im, op, kmsg.ACLResourceTypeTopic, name); err != nil {
		return nil, nil, err
	}
	t := im.Topic(name)
	if t == nil {
		return nil, nil, errorf(codeUnknownTopic, "This server does not host this topic-partition.")
	}
	return im, t, nil
}

func (s *Server) partition(r *http.Request, op kmsg.ACLOperation) (*metadata.Image, *metadata.Topic, *metadata.Partition, error) {
	im, t, err := s.topic(r, op)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || p < 0 || int(p) >= len(t.Partitions) {
		return nil, nil, nil, errorf(codeUnknownTopic, "This server does not host this topic-partition.")
	}
	part := t.Partitions[p]
	part.Topic, part.Index = t.Name, int32(p)
	return im, t, &part, nil
}

// waitImage waits until this broker's image satisfies ok, so that a client reads its own
// topic change from the broker it made it through.
func (s *Server) waitImage(ctx context.Context, ok func(*metadata.Image) bool) error {
	ch := s.images.Watch(ctx)
	for {
		if ok(s.image()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for this broker's metadata to show the change: %w", ctx.Err())
		}
	}
}
