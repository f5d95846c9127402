package restproxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/server/schemaregistry"
)

// Embedded formats, as Confluent names them.
const (
	formatBinary     = "BINARY"
	formatJSON       = "JSON"
	formatString     = "STRING"
	formatAvro       = "AVRO"
	formatProtobuf   = "PROTOBUF"
	formatJSONSchema = "JSONSCHEMA"
)

// formatOf maps a registry schema type to the embedded format that carries it.
var formatOf = map[string]string{
	schemaregistry.TypeAvro:     formatAvro,
	schemaregistry.TypeProtobuf: formatProtobuf,
	schemaregistry.TypeJSON:     formatJSONSchema,
}

// produceRequest is one record of Confluent's v3 ProduceRequest.
type produceRequest struct {
	// ID is accepted, as Confluent's, and not used.
	ID          *string         `json:"id"`
	PartitionID *int32          `json:"partition_id"`
	Headers     []requestHeader `json:"headers"`
	Key         *requestData    `json:"key"`
	Value       *requestData    `json:"value"`
	Timestamp   *time.Time      `json:"timestamp"`
}

type requestHeader struct {
	Name  string `json:"name"`
	Value []byte `json:"value"` // base64, as Confluent's
}

type requestData struct {
	Type                string          `json:"type"`
	Subject             *string         `json:"subject"`
	SubjectNameStrategy *string         `json:"subject_name_strategy"`
	SchemaID            *int32          `json:"schema_id"`
	SchemaVersion       *int32          `json:"schema_version"`
	Schema              *string         `json:"schema"`
	Data                json.RawMessage `json:"data"`
}

// produceResponse is Confluent's v3 ProduceResponse, with the error_code 200 of a
// delivered record.
type produceResponse struct {
	ErrorCode   int           `json:"error_code"`
	ClusterID   string        `json:"cluster_id"`
	TopicName   string        `json:"topic_name"`
	PartitionID int32         `json:"partition_id"`
	Offset      int64         `json:"offset"`
	Timestamp   string        `json:"timestamp"`
	Key         *responseData `json:"key,omitempty"`
	Value       *responseData `json:"value,omitempty"`
}

type responseData struct {
	Type          string `json:"type"`
	Subject       string `json:"subject,omitempty"`
	SchemaID      int32  `json:"schema_id,omitempty"`
	SchemaVersion int32  `json:"schema_version,omitempty"`
	Size          int    `json:"size"`
}

// defaultMaxBody bounds a non-streamed request body; a streamed one is read record by
// record, each bounded by half of it.
const defaultMaxBody = 64 << 20

var errRecordTooLarge = errors.New("record too large")

// boundedReader fails once more than limit bytes have been read past what the JSON
// decoder consumed, that is once the record being decoded is over limit (the decoder
// reads only when its buffer holds no complete value): a stream may be endless, its
// records may not.
type boundedReader struct {
	r        io.Reader
	read     int64
	consumed func() int64
	limit    int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.read-b.consumed() > b.limit {
		return 0, errRecordTooLarge
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

func (s *Server) produce(w http.ResponseWriter, r *http.Request) error {
	im, t, err := s.topic(r, kmsg.ACLOperationWrite)
	if err != nil {
		return err
	}
	// Streaming mode (a chunked body, Confluent's streaming form): records are read as
	// they come and each gets its delivery report as soon as it and the ones before it are
	// done; the status is 200 whatever the records' fates. Otherwise the whole body is
	// read; a body of one record is answered with that record's status.
	streaming := r.ContentLength < 0
	var body io.Reader = http.MaxBytesReader(w, r.Body, s.maxBody)
	var bounded *boundedReader
	if streaming {
		bounded = &boundedReader{r: r.Body, limit: s.maxBody / 2}
		body = bounded
		// Read the rest of the body while responses are written.
		_ = http.NewResponseController(w).EnableFullDuplex()
		// A full-duplex handler that returns before the body's end (a record too large,
		// bad JSON) must close the body itself: otherwise net/http reads the next
		// request while the body's read is still under way, and panics with "invalid
		// concurrent Body.Read call" (golang/go#68560), resetting the connection.
		defer r.Body.Close()
	}
	dec := json.NewDecoder(body)
	if bounded != nil {
		bounded.consumed = dec.InputOffset
	}
	p := &producer{s: s, im: im, topic: t, ctx: r.Context()}
	if !streaming {
		var reqs []json.RawMessage
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err == io.EOF {
				break
			} else if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
				return errorf(codeTooLarge, "The request body is over %d bytes; stream larger ones (Transfer-Encoding: chunked)", mbe.Limit)
			} else if err != nil {
				return errorf(codeBadRequest, "Bad Request: Error processing JSON: %v", err)
			}
			reqs = append(reqs, raw)
		}
		if len(reqs) == 0 {
			return errorf(codeBadRequest, "Bad Request: Request body is empty. Data is required.")
		}
		results := make([]chan any, len(reqs))
		for i, raw := range reqs {
			results[i] = p.start(raw)
		}
		if len(reqs) == 1 {
			res := <-results[0]
			body := s.reportBody(res)
			if ae, ok := res.(*apiError); ok {
				return reply(w, status(ae.code), body)
			}
			return reply(w, 200, body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		enc := json.NewEncoder(w)
		for _, ch := range results {
			_ = enc.Encode(s.reportBody(<-ch))
		}
		return nil
	}

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	// The writer answers in request order; the reader below starts each record's
	// produce without waiting for the ones before it, as Confluent's proxy does.
	queue := make(chan chan any, 1024)
	written := make(chan struct{})
	go func() {
		defer close(written)
		enc := json.NewEncoder(w)
		for ch := range queue {
			if err := enc.Encode(s.reportBody(<-ch)); err != nil {
				continue // the client went away; drain the rest so that nothing blocks
			}
			_ = rc.Flush()
		}
	}()
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			break
		}
		if err == nil && int64(len(raw)) > bounded.limit {
			err = errRecordTooLarge
		}
		if errors.Is(err, errRecordTooLarge) {
			queue <- done(errorf(codeTooLarge, "A streamed record is over %d bytes", s.maxBody/2))
			break
		}
		if err != nil {
			if r.Context().Err() == nil {
				queue <- done(errorf(codeBadRequest, "Bad Request: Error processing JSON: %v", err))
			}
			break
		}
		queue <- p.start(raw)
	}
	close(queue)
	<-written
	return nil
}

func done(v any) chan any {
	ch := make(chan any, 1)
	ch <- v
	return ch
}

// reportBody is the JSON of a record's outcome, counted in the metrics.
func (s *Server) reportBody(v any) any {
	if ae, ok := v.(*apiError); ok {
		s.metrics.records.WithLabelValues(strconv.Itoa(ae.code)).Inc()
		return errorBody(ae)
	}
	s.metrics.records.WithLabelValues("200").Inc()
	return v
}

// producer produces one request's records.
type producer struct {
	s     *Server
	im    *metadata.Image
	topic *metadata.Topic
	ctx   context.Context
}

// start serializes a record and hands it to the Kafka client; the channel gets its
// *produceResponse or *apiError.
func (p *producer) start(raw json.RawMessage) chan any {
	var req produceRequest
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&req); err != nil {
		return done(errorf(codeBadRequest, "Bad Request: Error processing JSON: %v", err))
	}
	rec := &kgo.Record{Topic: p.topic.Name}
	resp := &produceResponse{ErrorCode: 200, ClusterID: p.im.ClusterID, TopicName: p.topic.Name}
	var err error
	if rec.Key, resp.Key, err = p.serialize(req.Key, true); err != nil {
		return done(toAPIError(err))
	}
	if rec.Value, resp.Value, err = p.serialize(req.Value, false); err != nil {
		return done(toAPIError(err))
	}
	for _, h := range req.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Name, Value: h.Value})
	}
	if req.Timestamp != nil {
		rec.Timestamp = *req.Timestamp
	}
	ctx := p.ctx
	if req.PartitionID != nil {
		if *req.PartitionID < 0 || int(*req.PartitionID) >= len(p.topic.Partitions) {
			return done(errorf(codeUnknownTopic, "This server does not host this topic-partition."))
		}
		ctx = context.WithValue(ctx, partitionKey{}, *req.PartitionID)
	}
	// Bounded by the context, not kgo.RecordDeliveryTimeout, which counts from the
	// record's timestamp and so would time out a record the request dated in the past.
	ctx, cancel := context.WithTimeout(ctx, p.s.timeout)
	ch := make(chan any, 1)
	p.s.client.Produce(ctx, rec, func(r *kgo.Record, err error) {
		cancel()
		if err != nil {
			ch <- toAPIError(err)
			return
		}
		resp.PartitionID, resp.Offset = r.Partition, r.Offset
		resp.Timestamp = r.Timestamp.UTC().Format(time.RFC3339Nano)
		ch <- resp
	})
	return ch
}

// serialize turns a record's key or value into bytes.
func (p *producer) serialize(d *requestData, isKey bool) ([]byte, *responseData, error) {
	if d == nil {
		return nil, nil, nil
	}
	format := strings.ToUpper(d.Type)
	schemaFields := d.Subject != nil || d.SubjectNameStrategy != nil || d.SchemaID != nil || d.SchemaVersion != nil || d.Schema != nil
	switch format {
	case formatBinary, formatJSON, formatString:
		if schemaFields {
			return nil, nil, errorf(codeBadRequest, "Bad Request: 'type=%s' cannot be used with a schema", format)
		}
		b, err := plainBytes(format, d.Data)
		if err != nil {
			return nil, nil, err
		}
		out := &responseData{Type: format, Size: len(b)}
		return b, out, nil
	case "", formatAvro, formatProtobuf, formatJSONSchema:
	default:
		return nil, nil, errorf(codeBadRequest, "Bad Request: unknown type %q: one of BINARY, JSON, STRING, AVRO, PROTOBUF, JSONSCHEMA", d.Type)
	}
	if d.Subject != nil && d.SubjectNameStrategy != nil {
		return nil, nil, errorf(codeBadRequest, "Bad Request: Only one of 'subject_name_strategy' or 'subject' can be used.")
	}
	if d.SchemaID != nil && (d.SchemaVersion != nil || d.Schema != nil) || d.SchemaVersion != nil && d.Schema != nil {
		return nil, nil, errorf(codeBadRequest, "Bad Request: Only one of 'schema_id', 'schema_version' or 'schema' can be used.")
	}
	// The registry as this broker knows it now: a long stream sees schemas registered
	// while it runs.
	reg := p.s.image().SchemaRegistry
	if reg == nil {
		reg = &metadata.SchemaRegistry{}
	}
	subject, id, version, err := p.resolveSchema(reg, d, isKey)
	if err != nil {
		return nil, nil, err
	}
	if format == "" && !schemaFields && id == 0 {
		// No type, nothing to look a schema up by, none under the topic's subject:
		// Confluent's proxy falls back to BINARY.
		b, err := plainBytes(formatBinary, d.Data)
		if err != nil {
			return nil, nil, err
		}
		return b, &responseData{Type: formatBinary, Size: len(b)}, nil
	}
	typ, err := p.s.serde.SchemaType(reg, id)
	if err != nil {
		return nil, nil, err
	}
	if format != "" && formatOf[typ] != format {
		return nil, nil, errorf(codeBadRequest, "Bad Request: schema %d is %s, not %s", id, typ, format)
	}
	if len(d.Data) == 0 || string(d.Data) == "null" {
		return nil, &responseData{Type: formatOf[typ], Subject: subject, SchemaID: id, SchemaVersion: version}, nil
	}
	b, err := p.s.serde.Encode(reg, id, d.Data)
	if err != nil {
		var re *metadata.RegistryError
		if errors.As(err, &re) {
			return nil, nil, err
		}
		return nil, nil, errorf(codeJSONConversion, "Conversion of JSON to %s failed: %v", formatOf[typ], err)
	}
	return b, &responseData{Type: formatOf[typ], Subject: subject, SchemaID: id, SchemaVersion: version, Size: len(b)}, nil
}

// resolveSchema finds the schema a key or value is written with, as Confluent's
// SchemaManager does: a subject (given, or named by the strategy, TopicNameStrategy by
// default), then the schema_id, the subject's schema_version, the subject's version
// with this schema text, or the subject's latest version. id is 0 when there is no
// schema info and the subject has no version.
func (p *producer) resolveSchema(reg *metadata.SchemaRegistry, d *requestData, isKey bool) (subject string, id, version int32, err error) {
	suffix := "-value"
	if isKey {
		suffix = "-key"
	}
	strategy := "TOPIC_NAME"
	if d.SubjectNameStrategy != nil {
		strategy = strings.ToUpper(*d.SubjectNameStrategy)
	}
	switch {
	case d.Subject != nil:
		subject = *d.Subject
	case strategy == "TOPIC_NAME":
		subject = p.topic.Name + suffix
	case strategy == "RECORD_NAME" || strategy == "TOPIC_RECORD_NAME":
		if d.SchemaID == nil {
			return "", 0, 0, errorf(codeBadRequest, "Bad Request: subject_name_strategy %s needs a schema_id to name the record", strategy)
		}
		name, err := schemaregistry.NewRecordNames().RecordName(reg, *d.SchemaID, []byte{0, 0, 0, 0, 0, 0})
		if err != nil {
			return "", 0, 0, errorf(codeBadRequest, "Bad Request: schema %d names no record: %v", *d.SchemaID, err)
		}
		subject = name
		if strategy == "TOPIC_RECORD_NAME" {
			subject = p.topic.Name + "-" + name
		}
	default:
		return "", 0, 0, errorf(codeBadRequest, "Bad Request: unknown subject_name_strategy %q: one of TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME", *d.SubjectNameStrategy)
	}
	versions := reg.Versions(subject, false)
	switch {
	case d.SchemaID != nil:
		if reg.Schema(*d.SchemaID) == nil {
			return "", 0, 0, metadata.RegistryErrorf(metadata.RegistrySchemaNotFound, "Schema %d not found", *d.SchemaID)
		}
		for _, v := range versions {
			if v.SchemaID == *d.SchemaID {
				return subject, v.SchemaID, v.Version, nil
			}
		}
		return subject, *d.SchemaID, 0, nil
	case d.SchemaVersion != nil:
		v, ok := reg.Version(subject, *d.SchemaVersion)
		if !ok || v.Deleted {
			if len(versions) == 0 {
				return "", 0, 0, metadata.RegistryErrorf(metadata.RegistrySubjectNotFound, "Subject '%s' not found.", subject)
			}
			return "", 0, 0, metadata.RegistryErrorf(metadata.RegistryVersionNotFound, "Version %d not found.", *d.SchemaVersion)
		}
		return subject, v.SchemaID, v.Version, nil
	case d.Schema != nil:
		// Shale's proxy does not register schemas: the text must be registered under
		// the subject already (it is compared as the registry stores it).
		for _, v := range versions {
			if sc := reg.Schema(v.SchemaID); sc != nil && sameSchema(sc, *d.Schema) {
				return subject, v.SchemaID, v.Version, nil
			}
		}
		return "", 0, 0, metadata.RegistryErrorf(metadata.RegistrySchemaNotFound, "Schema not found under subject '%s'; register it with the schema registry first", subject)
	}
	if len(versions) == 0 {
		if d.Type == "" && d.Subject == nil && d.SubjectNameStrategy == nil {
			return subject, 0, 0, nil // nothing asked a schema for: BINARY
		}
		return "", 0, 0, metadata.RegistryErrorf(metadata.RegistrySubjectNotFound, "Subject '%s' not found.", subject)
	}
	latest := versions[len(versions)-1]
	return subject, latest.SchemaID, latest.Version, nil
}

// sameSchema compares a schema text with a stored one, JSON texts compacted as the
// registry stores them.
func sameSchema(sc *metadata.RegistrySchema, text string) bool {
	if sc.Schema == text {
		return true
	}
	var b bytes.Buffer
	return sc.Type != schemaregistry.TypeProtobuf && json.Compact(&b, []byte(text)) == nil && b.String() == sc.Schema
}

// plainBytes serializes BINARY (base64), STRING and JSON data.
func plainBytes(format string, data json.RawMessage) ([]byte, error) {
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	switch format {
	case formatJSON:
		var b bytes.Buffer
		if err := json.Compact(&b, data); err != nil {
			return nil, errorf(codeBadRequest, "Bad Request: %v", err)
		}
		return b.Bytes(), nil
	case formatString:
		var str string
		if err := json.Unmarshal(data, &str); err != nil {
			return nil, errorf(codeBadRequest, "Bad Request: STRING data must be a JSON string")
		}
		return []byte(str), nil
	default:
		var str string
		if err := json.Unmarshal(data, &str); err != nil {
			return nil, errorf(codeBadRequest, "Bad Request: BINARY data must be a base64 JSON string")
		}
		b, err := base64.StdEncoding.DecodeString(str)
		if err != nil {
			return nil, errorf(codeBadRequest, "Bad Request: BINARY data is not base64: %v", err)
		}
		return b, nil
	}
}

// partitionKey marks a record's context with the partition the request asked for.
type partitionKey struct{}

// partitioner sends a record to the partition its request named, and any other record
// where a Kafka producer would (kgo's sticky key partitioner: murmur2 of the key as
// Kafka's Java client, sticky batches for records without a key).
type partitioner struct {
	inner kgo.Partitioner
}

func (p *partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{inner: p.inner.ForTopic(topic)}
}

type topicPartitioner struct {
	inner kgo.TopicPartitioner
}

func (t *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	if r.Context != nil {
		if _, ok := r.Context.Value(partitionKey{}).(int32); ok {
			return true
		}
	}
	return t.inner.RequiresConsistency(r)
}

func (t *topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context != nil {
		// Even when this client's metadata knows fewer partitions than the broker's
		// image (partitions just added): kgo then fails the record, rather than send it
		// elsewhere.
		if p, ok := r.Context.Value(partitionKey{}).(int32); ok {
			return int(p)
		}
	}
	return t.inner.Partition(r, n)
}

func (t *topicPartitioner) OnNewBatch() {
	if nb, ok := t.inner.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
