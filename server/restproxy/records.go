package restproxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// Reading records is Shale's own: Confluent's v3 API has no consume endpoint (its v2
// API has stateful consumer instances instead). GET
// /v3/clusters/{c}/topics/{t}/partitions/{p}/records?offset=N&max_records=M returns up
// to M committed records (read_committed: up to the last stable offset) from offset N.

// Limits of one read.
const (
	defaultMaxRecords = 100
	maxMaxRecords     = 10000
	defaultMaxBytes   = 1 << 20
	maxMaxBytes       = 64 << 20
)

type recordList struct {
	Kind        string       `json:"kind"`
	Metadata    listMeta     `json:"metadata"`
	ClusterID   string       `json:"cluster_id"`
	TopicName   string       `json:"topic_name"`
	PartitionID int32        `json:"partition_id"`
	NextOffset  int64        `json:"next_offset"`
	Data        []recordData `json:"data"`
}

type recordData struct {
	Offset    int64            `json:"offset"`
	Timestamp string           `json:"timestamp"`
	Headers   []responseHeader `json:"headers"`
	Key       *recordPayload   `json:"key"`
	Value     *recordPayload   `json:"value"`
}

type responseHeader struct {
	Name  string `json:"name"`
	Value []byte `json:"value"` // base64
}

type recordPayload struct {
	Type     string          `json:"type"`
	SchemaID int32           `json:"schema_id,omitempty"`
	Size     int             `json:"size"`
	Data     json.RawMessage `json:"data"`
}

func intParam(q url.Values, name string, def, lo, hi int64) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errorf(codeBadRequest, "Bad Request: %s must be a number from %d to %d", name, lo, hi)
	}
	return n, nil
}

// formatParam reads key_format or value_format (falling back to format): how stored
// bytes are shown.
func formatParam(q url.Values, name string) (string, error) {
	f := strings.ToUpper(q.Get(name))
	if f == "" {
		f = strings.ToUpper(q.Get("format"))
	}
	switch f {
	case "":
		return formatBinary, nil
	case formatBinary, formatJSON, formatString, "SCHEMA", formatAvro, formatProtobuf, formatJSONSchema:
		return f, nil
	}
	return "", errorf(codeBadRequest, "Bad Request: unknown %s %q: one of BINARY, JSON, STRING, AVRO, PROTOBUF, JSONSCHEMA (or SCHEMA for any registered one)", name, f)
}

func (s *Server) readRecords(w http.ResponseWriter, r *http.Request) error {
	im, t, p, err := s.partition(r, kmsg.ACLOperationRead)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	maxRecords, err := intParam(q, "max_records", defaultMaxRecords, 1, maxMaxRecords)
	if err != nil {
		return err
	}
	maxBytes, err := intParam(q, "max_bytes", defaultMaxBytes, 1, maxMaxBytes)
	if err != nil {
		return err
	}
	keyFormat, err := formatParam(q, "key_format")
	if err != nil {
		return err
	}
	valueFormat, err := formatParam(q, "value_format")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	index := p.Index
	starts, err := s.adm.ListStartOffsets(ctx, t.Name)
	if err != nil {
		return fmt.Errorf("list start offsets of %s: %w", t.Name, err)
	}
	ends, err := s.adm.ListCommittedOffsets(ctx, t.Name)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", t.Name, err)
	}
	start, ok := starts.Lookup(t.Name, index)
	if ok && start.Err != nil {
		return fmt.Errorf("list start offset of %s-%d: %w", t.Name, index, start.Err)
	}
	end, ok2 := ends.Lookup(t.Name, index)
	if ok2 && end.Err != nil {
		return fmt.Errorf("list end offset of %s-%d: %w", t.Name, index, end.Err)
	}
	if !ok || !ok2 {
		return errorf(codeUnknownTopic, "This server does not host this topic-partition.")
	}
	offset, err := intParam(q, "offset", start.Offset, 0, 1<<62)
	if err != nil {
		return err
	}
	// Records below the log start offset are gone: reading starts at the first one left.
	offset = max(offset, start.Offset)

	out := recordList{Kind: "KafkaRecordList", ClusterID: im.ClusterID, TopicName: t.Name, PartitionID: index, NextOffset: offset, Data: []recordData{}}
	if offset < end.Offset {
		recs, err := s.fetch(ctx, t.Name, index, offset, end.Offset, int(maxRecords), int32(maxBytes))
		if err != nil {
			return err
		}
		reg := im.SchemaRegistry
		if now := s.image(); now.SchemaRegistry != nil {
			reg = now.SchemaRegistry
		}
		for _, rec := range recs {
			d := recordData{Offset: rec.Offset, Timestamp: rec.Timestamp.UTC().Format(time.RFC3339Nano), Headers: []responseHeader{},
				Key: s.payload(reg, keyFormat, rec.Key), Value: s.payload(reg, valueFormat, rec.Value)}
			for _, h := range rec.Headers {
				d.Headers = append(d.Headers, responseHeader{Name: h.Key, Value: h.Value})
			}
			out.Data = append(out.Data, d)
			out.NextOffset = rec.Offset + 1
		}
	}
	self := fmt.Sprintf("%s/partitions/%d/records", topicURL(r, im.ClusterID, t.Name), index)
	out.Metadata.Self = self + "?" + q.Encode()
	nq := url.Values{}
	for k, v := range q {
		nq[k] = v
	}
	nq.Set("offset", strconv.FormatInt(out.NextOffset, 10))
	next := self + "?" + nq.Encode()
	out.Metadata.Next = &next
	return reply(w, 200, out)
}

// fetch reads committed records of one partition from offset, stopping before end, at
// max records, or when the partition has nothing more to give (the rest up to end are
// aborted records or transaction markers). A client of its own per read keeps reads
// independent of each other and of the producer; it is closed before returning.
func (s *Server) fetch(ctx context.Context, topic string, partition int32, offset, end int64, maxRecords int, maxBytes int32) ([]*kgo.Record, error) {
	opts := append([]kgo.Opt{}, s.kafka...)
	opts = append(opts,
		kgo.ClientID("shale-rest-proxy"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(offset)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxBytes(maxBytes),
		kgo.FetchMaxPartitionBytes(maxBytes),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	var out []*kgo.Record
	size := 0
	for len(out) < maxRecords {
		// A fetch with data returns at once; one that waits its whole max wait plus a
		// margin found nothing below end.
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollRecords(pctx, maxRecords-len(out))
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, fmt.Errorf("fetch %s-%d: %w", topic, partition, ferr)
		}
		got := 0
		stop := false
		fs.EachRecord(func(rec *kgo.Record) {
			if stop || rec.Offset >= end || len(out) >= maxRecords {
				stop = true
				return
			}
			size += len(rec.Key) + len(rec.Value)
			out = append(out, rec)
			got++
			if len(out) > 0 && size >= int(maxBytes) {
				stop = true
			}
		})
		if stop || got == 0 || (len(out) > 0 && out[len(out)-1].Offset+1 >= end) {
			break
		}
	}
	return out, nil
}

// payload shows a key or value in the asked format, or as BINARY when it is not in that
// format.
func (s *Server) payload(reg *metadata.SchemaRegistry, format string, b []byte) *recordPayload {
	if b == nil {
		return nil
	}
	switch format {
	case formatJSON:
		if json.Valid(b) {
			return &recordPayload{Type: formatJSON, Size: len(b), Data: b}
		}
	case formatString:
		if utf8.Valid(b) {
			data, _ := json.Marshal(string(b))
			return &recordPayload{Type: formatString, Size: len(b), Data: data}
		}
	case "SCHEMA", formatAvro, formatProtobuf, formatJSONSchema:
		if reg != nil {
			if id, typ, doc, err := s.serde.Decode(reg, b); err == nil && (format == "SCHEMA" || formatOf[typ] == format) {
				return &recordPayload{Type: formatOf[typ], SchemaID: id, Size: len(b), Data: doc}
			}
		}
	}
	data, _ := json.Marshal(base64.StdEncoding.EncodeToString(b))
	return &recordPayload{Type: formatBinary, Size: len(b), Data: data}
}
