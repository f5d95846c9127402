package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/metadata"
)

const (
	defaultBrowse = 50
	maxBrowse     = 500
	// maxScan bounds how many records a search reads looking for matches.
	maxScan = 5000
)

type header struct{ Key, Value string }

type messageRow struct {
	Partition  int32
	Offset     int64
	Timestamp  string
	Key, Value string
	// KeySchema and ValueSchema describe the schema a key or value was decoded by
	// ("schema 3 · AVRO · orders-value"); empty when shown as text, JSON or hex.
	KeySchema, ValueSchema string
	Headers                []header
}

type messagesData struct {
	Topics                []string
	Topic, Format, Search string
	Partition             int32
	Partitions            []int32
	From                  string // "offset" or "timestamp"
	Offset, Timestamp     string
	Limit                 int
	Start, End            int64
	Records               []messageRow
	Scanned               int
	Produced              string
	Browsed               bool
}

func (c *Console) messages(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page) {
	p.Nav, p.Title = "messages", "Messages"
	q := r.URL.Query()
	d := messagesData{Topic: q.Get("topic"), Format: q.Get("format"), Search: q.Get("search"), From: q.Get("from"),
		Offset: q.Get("offset"), Timestamp: q.Get("timestamp"), Produced: q.Get("produced"), Start: -1, End: -1}
	if d.From != "timestamp" {
		d.From = "offset"
	}
	if d.Format == "" {
		d.Format = "auto"
	}
	d.Limit = defaultBrowse
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		d.Limit = min(n, maxBrowse)
	}
	if n, err := strconv.ParseInt(q.Get("partition"), 10, 32); err == nil {
		d.Partition = int32(n)
	}
	_, adm, err := c.clients(ss)
	if err != nil {
		p.fail("client", err)
		p.Data = d
		c.render(w, "messages", p)
		return
	}
	md, err := adm.Metadata(ctx)
	p.fail("Metadata", err)
	d.Topics = md.Topics.Names()
	sortStrings(d.Topics)
	if d.Topic == "" && len(d.Topics) > 0 {
		d.Topic = d.Topics[0]
	}
	if t, ok := md.Topics[d.Topic]; !ok && err == nil && q.Has("topic") {
		// Not looked up by name: that could create it (auto.create.topics.enable).
		p.fail("Metadata", fmt.Errorf("%w: %s", kerr.UnknownTopicOrPartition, d.Topic))
	} else if ok {
		for _, pd := range t.Partitions.Sorted() {
			d.Partitions = append(d.Partitions, pd.Partition)
		}
	}
	if _, ok := md.Topics[d.Topic]; q.Has("topic") && d.Topic != "" && ok {
		d.Browsed = true
		c.browse(ctx, ss, &d, p)
	}
	p.Data = d
	c.render(w, "messages", p)
}

func (c *Console) browse(ctx context.Context, ss *session, d *messagesData, p *page) {
	_, adm, _ := c.clients(ss)
	starts, err := adm.ListStartOffsets(ctx, d.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		p.fail("ListOffsets (earliest)", err)
		return
	}
	ends, err := adm.ListEndOffsets(ctx, d.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		p.fail("ListOffsets (latest)", err)
		return
	}
	so, ok1 := starts.Lookup(d.Topic, d.Partition)
	eo, ok2 := ends.Lookup(d.Topic, d.Partition)
	if !ok1 || !ok2 {
		p.fail("ListOffsets", fmt.Errorf("topic %s has no partition %d", d.Topic, d.Partition))
		return
	}
	d.Start, d.End = so.Offset, eo.Offset
	from := max(d.Start, d.End-int64(d.Limit))
	switch d.From {
	case "timestamp":
		ms, err := parseTimestamp(d.Timestamp)
		if err != nil {
			p.fail("timestamp", err)
			return
		}
		after, err := adm.ListOffsetsAfterMilli(ctx, ms, d.Topic)
		if err == nil {
			err = after.Error()
		}
		if err != nil {
			p.fail("ListOffsets (by timestamp)", err)
			return
		}
		o, _ := after.Lookup(d.Topic, d.Partition)
		from = o.Offset
		if from < 0 {
			from = d.End
		}
	default:
		if d.Offset != "" {
			n, err := strconv.ParseInt(d.Offset, 10, 64)
			if err != nil {
				p.fail("offset", fmt.Errorf("%q is not an offset", d.Offset))
				return
			}
			from = max(n, d.Start)
		}
	}
	if from >= d.End {
		return
	}
	want, scan := d.Limit, d.Limit
	if d.Search != "" {
		scan = maxScan
	}
	cl, err := c.newClient(ss, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{d.Topic: {d.Partition: kgo.NewOffset().At(from)}}),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		p.fail("client", err)
		return
	}
	defer cl.Close()
	// Up to what was there when the page asked: a busy partition does not keep it polling.
	last := d.End - 1
	var reg *metadata.SchemaRegistry
	if c.opts.SchemaRegistry != nil && d.Format == "auto" {
		reg = c.opts.SchemaRegistry()
	}
	for len(d.Records) < want && d.Scanned < scan {
		fs := cl.PollRecords(ctx, scan-d.Scanned)
		if err := ctx.Err(); err != nil {
			p.fail("Fetch", fmt.Errorf("stopped after %d records: %w", d.Scanned, err))
			return
		}
		done := false
		fs.EachError(func(_ string, _ int32, err error) { p.fail("Fetch", err); done = true })
		fs.EachRecord(func(rec *kgo.Record) {
			if done || len(d.Records) >= want {
				return
			}
			d.Scanned++
			if rec.Offset >= last {
				done = true
			}
			if rec.Offset > last {
				return
			}
			if d.Search != "" && !bytes.Contains(rec.Key, []byte(d.Search)) && !bytes.Contains(rec.Value, []byte(d.Search)) {
				return
			}
			row := messageRow{Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp.UTC().Format("2006-01-02 15:04:05.000Z")}
			row.Key, row.KeySchema = c.formatData(reg, rec.Key, d.Format)
			row.Value, row.ValueSchema = c.formatData(reg, rec.Value, d.Format)
			if rec.Key == nil {
				row.Key = "null"
			}
			if rec.Value == nil {
				row.Value = "null"
			}
			for _, h := range rec.Headers {
				row.Headers = append(row.Headers, header{h.Key, formatBytes(h.Value, "auto")})
			}
			d.Records = append(d.Records, row)
		})
		if done {
			return
		}
	}
}

// parseTimestamp reads Unix milliseconds, RFC 3339, or the datetime-local form's
// "2006-01-02T15:04" (taken as UTC).
func parseTimestamp(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("%q is neither Unix milliseconds nor RFC 3339", s)
}

// formatData shows a key or value and what schema it was decoded by: when it is in
// Confluent's wire format, the JSON document its schema decodes it to, pretty-printed,
// with the schema's id, type and subjects; else as formatBytes does.
func (c *Console) formatData(reg *metadata.SchemaRegistry, b []byte, format string) (string, string) {
	if reg == nil || len(b) < 5 || b[0] != 0 {
		return formatBytes(b, format), ""
	}
	id, typ, doc, err := c.serde.Decode(reg, b)
	var out bytes.Buffer
	if err == nil {
		err = json.Indent(&out, doc, "", "  ")
	}
	if err != nil {
		// Not decoded (an id the registry does not hold, or bytes its schema does not
		// read): the bytes in hex, a leading NUL being no text, and why.
		return hex.Dump(b), fmt.Sprintf("not decoded by schema %d: %v", id, err)
	}
	desc := fmt.Sprintf("schema %d · %s", id, typ)
	if subjects := subjectsOf(reg, id); len(subjects) > 0 {
		desc += " · " + strings.Join(subjects, ", ")
	}
	return out.String(), desc
}

// subjectsOf lists the subjects with a live version registered as schema id, sorted.
func subjectsOf(reg *metadata.SchemaRegistry, id int32) []string {
	var out []string
	for subject, versions := range reg.Subjects {
		for _, v := range versions {
			if v.SchemaID == id && !v.Deleted {
				out = append(out, subject)
				break
			}
		}
	}
	sortStrings(out)
	return out
}

// formatBytes shows a key, value or header as format says: text, json (pretty), hex,
// or auto (JSON pretty-printed when it parses, text when UTF-8, else hex).
func formatBytes(b []byte, format string) string {
	switch format {
	case "hex":
		return hex.Dump(b)
	case "text":
		if utf8.Valid(b) {
			return string(b)
		}
		return hex.Dump(b)
	}
	t := bytes.TrimSpace(b)
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
		var out bytes.Buffer
		if json.Indent(&out, t, "", "  ") == nil {
			return out.String()
		}
	}
	if format == "json" || utf8.Valid(b) {
		if utf8.Valid(b) {
			return string(b)
		}
	}
	return hex.Dump(b)
}

// produce writes one test record as the viewer, then shows it.
func (c *Console) produce(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page) {
	topic := r.PostFormValue("topic")
	part, err := strconv.ParseInt(r.PostFormValue("partition"), 10, 32)
	if err != nil {
		part = 0
	}
	rec := &kgo.Record{Topic: topic, Partition: int32(part), Value: []byte(r.PostFormValue("value"))}
	if k := r.PostFormValue("key"); k != "" {
		rec.Key = []byte(k)
	}
	for _, line := range strings.Split(r.PostFormValue("headers"), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && k != "" {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	// Its own client: the partition is the viewer's choice, not a partitioner's.
	cl, err := c.newClient(ss, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err == nil {
		defer cl.Close()
		err = cl.ProduceSync(ctx, rec).FirstErr()
	}
	if err != nil {
		p.Nav, p.Title = "messages", "Messages"
		p.fail("Produce", err)
		p.Data = messagesData{Topic: topic, Partition: int32(part), From: "offset", Format: "auto", Limit: defaultBrowse, Start: -1, End: -1, Topics: []string{topic}, Partitions: []int32{int32(part)}}
		w.WriteHeader(http.StatusBadRequest)
		c.render(w, "messages", p)
		return
	}
	v := url.Values{"topic": {topic}, "partition": {strconv.Itoa(int(part))}, "offset": {strconv.FormatInt(rec.Offset, 10)},
		"produced": {strconv.FormatInt(rec.Offset, 10)}}
	http.Redirect(w, r, "/messages?"+v.Encode(), http.StatusSeeOther)
}
