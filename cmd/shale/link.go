package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

const linkUsage = `Usage: shale link <create|describe|delete|mirror|promote|failover> [flags]

Cluster links and mirror topics (Confluent Cluster Linking's model): a link on this,
the destination, cluster names a source cluster as a Kafka client would; a mirror topic
copies a source topic at the same offsets and is read-only until it is promoted.

  create    --link L --config bootstrap.servers=H:P [--config k=v]...: store a link
            (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location,
            cluster.link.fetch.bytes.per.sec, consumer.offset.sync.enable, ...)
  describe  [--link L]: the links, or one link with its mirror topics and their states
  delete    --link L [--force]: remove a link (--force stops its active mirrors)
  mirror    --link L --source-topic T [--topic D] [--reverse]: create mirror topic D
            (default T); with --reverse make the existing topic D a mirror again, from
            where it and the source diverged (failback, over a link the other way)
  promote   --link L [--topic T]...: stop mirroring and make the topics writable (all
            of the link's active mirrors without --topic); the source must answer, and
            the lag at that moment (records, bytes, age) is printed
  failover  --link L [--topic T]...: the same without asking the source (it is lost):
            the destination's offsets are printed

Every subcommand talks to a broker's HTTP API (rest.proxy.listener) with --rest-url URL
(default http://127.0.0.1:8082), --user and --password.
`

func linkCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "link", linkUsage, map[string]subcommand{
		"create":   linkCreate,
		"describe": linkDescribe,
		"delete":   linkDelete,
		"mirror":   linkMirror,
		"promote":  named("promote", linkPromote),
		"failover": named("failover", linkPromote),
	}, args, stdout, stderr)
}

// restFlags reach the REST API.
type restFlags struct {
	url, user, password string
	timeout             time.Duration
}

func (rf *restFlags) register(c *command) {
	rf.registerAPI(c, "http://127.0.0.1:8082", "`URL` of a broker's HTTP API (rest.proxy.listener)")
	c.fs.DurationVar(&rf.timeout, "timeout", 60*time.Second, "how long to wait for the answer")
}

// registerAPI registers --rest-url (defaulting to def) and the basic authentication
// flags, for a command that has its own --timeout: the context of its calls bounds them.
func (rf *restFlags) registerAPI(c *command, def, usage string) {
	c.fs.StringVar(&rf.url, "rest-url", def, usage)
	c.fs.StringVar(&rf.user, "user", "", "`name` for HTTP basic authentication")
	c.fs.StringVar(&rf.password, "password", "", "`password` for HTTP basic authentication")
}

// restError is the API's error body.
type restError struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func (e *restError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// call sends a request to path (below /v3/clusters/{cluster}) and decodes the answer
// into out.
func (rf *restFlags) call(ctx context.Context, method, path string, body, out any) error {
	base := strings.TrimRight(rf.url, "/")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--rest-url %q is not an http:// or https:// URL", rf.url)
	}
	hc := &http.Client{Timeout: rf.timeout}
	var clusters struct {
		Data []struct {
			ClusterID string `json:"cluster_id"`
		} `json:"data"`
	}
	if err := rf.do(ctx, hc, http.MethodGet, base+"/v3/clusters", nil, &clusters); err != nil {
		return err
	}
	if len(clusters.Data) != 1 {
		return fmt.Errorf("%s lists %d clusters", base, len(clusters.Data))
	}
	return rf.do(ctx, hc, method, base+"/v3/clusters/"+url.PathEscape(clusters.Data[0].ClusterID)+path, body, out)
}

func (rf *restFlags) do(ctx context.Context, hc *http.Client, method, u string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if rf.user != "" {
		req.SetBasicAuth(rf.user, rf.password)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var re restError
		if json.Unmarshal(data, &re) == nil && re.Message != "" {
			return &re
		}
		return fmt.Errorf("%s %s: %s", method, u, resp.Status)
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}

func linkCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale link create", "shale link create --link L --config bootstrap.servers=H:P [--config k=v]... [flags]",
		"Stores a cluster link to a source cluster on this (the destination) cluster.")
	var rf restFlags
	rf.register(c)
	link := c.fs.String("link", "", "the link's `name`")
	validate := c.fs.Bool("validate-only", false, "check the link's configs without storing it")
	type cfg struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	var configs []cfg
	c.fs.Func("config", "a link config, `key=value` (repeatable)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return errors.New("want key=value")
		}
		configs = append(configs, cfg{k, val})
		return nil
	})
	if _, code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	if *link == "" {
		return c.usageErr(stderr, "name the link with --link")
	}
	body := map[string]any{"configs": configs, "validate_only": *validate}
	if err := rf.call(ctx, http.MethodPost, "/links?link_name="+url.QueryEscape(*link), body, nil); err != nil {
		fmt.Fprintf(stderr, "shale link create: %v\n", err)
		return exitFailed
	}
	if *validate {
		fmt.Fprintf(stdout, "link %s is valid\n", *link)
	} else {
		fmt.Fprintf(stdout, "created link %s\n", *link)
	}
	return exitOK
}

type linkInfo struct {
	LinkName string `json:"link_name"`
	LinkID   string `json:"link_id"`
	Configs  []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"configs"`
	Topics []string `json:"topic_names"`
}

type mirrorInfo struct {
	LinkName        string `json:"link_name"`
	MirrorTopicName string `json:"mirror_topic_name"`
	SourceTopicName string `json:"source_topic_name"`
	MirrorStatus    string `json:"mirror_status"`
	StateTimeMs     int64  `json:"state_time_ms"`
	LagKnown        bool   `json:"lag_known"`
	Lags            []struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"last_source_fetched_offset"`
		SourceEnd int64 `json:"source_end_offset"`
		Lag       int64 `json:"lag"`
		LagBytes  int64 `json:"lag_bytes"`
		LagMs     int64 `json:"lag_ms"`
	} `json:"mirror_lags"`
	Error *restError `json:"error"`
}

func linkDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale link describe", "shale link describe [--link L] [flags]",
		"Lists the cluster links, or describes one with its mirror topics.")
	var rf restFlags
	rf.register(c)
	link := c.fs.String("link", "", "the link's `name` (default: list them all)")
	if _, code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	defer tw.Flush()
	if *link == "" {
		var links struct {
			Data []linkInfo `json:"data"`
		}
		if err := rf.call(ctx, http.MethodGet, "/links", nil, &links); err != nil {
			fmt.Fprintf(stderr, "shale link describe: %v\n", err)
			return exitFailed
		}
		fmt.Fprintln(tw, "LINK\tID\tBOOTSTRAP SERVERS\tMIRROR TOPICS")
		for _, l := range links.Data {
			bs := ""
			for _, c := range l.Configs {
				if c.Name == "bootstrap.servers" {
					bs = c.Value
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", l.LinkName, l.LinkID, bs, len(l.Topics))
		}
		return exitOK
	}
	var l linkInfo
	if err := rf.call(ctx, http.MethodGet, "/links/"+url.PathEscape(*link), nil, &l); err != nil {
		fmt.Fprintf(stderr, "shale link describe: %v\n", err)
		return exitFailed
	}
	var mirrors struct {
		Data []mirrorInfo `json:"data"`
	}
	if err := rf.call(ctx, http.MethodGet, "/links/"+url.PathEscape(*link)+"/mirrors", nil, &mirrors); err != nil {
		fmt.Fprintf(stderr, "shale link describe: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(tw, "link %s (id %s)\n", l.LinkName, l.LinkID)
	for _, c := range l.Configs {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Value)
	}
	fmt.Fprintln(tw, "MIRROR TOPIC\tSOURCE TOPIC\tSTATE\tSINCE")
	for _, m := range mirrors.Data {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.MirrorTopicName, m.SourceTopicName, m.MirrorStatus,
			time.UnixMilli(m.StateTimeMs).UTC().Format(time.RFC3339))
	}
	return exitOK
}

func linkDelete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale link delete", "shale link delete --link L [--force] [flags]",
		"Removes a cluster link; with --force its active mirror topics are stopped (promoted) first.")
	var rf restFlags
	rf.register(c)
	link := c.fs.String("link", "", "the link's `name`")
	force := c.fs.Bool("force", false, "delete even while mirror topics are active (they are stopped)")
	if _, code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	if *link == "" {
		return c.usageErr(stderr, "name the link with --link")
	}
	q := ""
	if *force {
		q = "?force=true"
	}
	if err := rf.call(ctx, http.MethodDelete, "/links/"+url.PathEscape(*link)+q, nil, nil); err != nil {
		fmt.Fprintf(stderr, "shale link delete: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "deleted link %s\n", *link)
	return exitOK
}

func linkMirror(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale link mirror", "shale link mirror --link L --source-topic T [--topic D] [flags]",
		"Creates a mirror topic: the source topic's partitions, at the same offsets, read-only until promoted.")
	var rf restFlags
	rf.register(c)
	link := c.fs.String("link", "", "the link's `name`")
	source := c.fs.String("source-topic", "", "the source cluster's `topic`")
	topic := c.fs.String("topic", "", "the mirror `topic` (default: the source topic's name)")
	rfactor := c.fs.Int("replication-factor", 0, "the mirror's replication `factor` (default: default.replication.factor)")
	reverse := c.fs.Bool("reverse", false, "make the existing --topic a mirror of the source topic, truncated to where the two diverged (failback after a failover)")
	if _, code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	if *link == "" || *source == "" {
		return c.usageErr(stderr, "name the link with --link and the source topic with --source-topic")
	}
	body := map[string]any{"source_topic_name": *source, "mirror_topic_name": *topic, "replication_factor": *rfactor, "reverse": *reverse}
	var m mirrorInfo
	if err := rf.call(ctx, http.MethodPost, "/links/"+url.PathEscape(*link)+"/mirrors", body, &m); err != nil {
		fmt.Fprintf(stderr, "shale link mirror: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "created mirror topic %s of %s over link %s\n", m.MirrorTopicName, m.SourceTopicName, *link)
	return exitOK
}

func linkPromote(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	about := "Stops mirroring and makes mirror topics writable, keeping everything they hold; prints the lag at that moment " +
		"(what the destination lacks of the source: records, bytes, age of the oldest missing record)."
	if sub == "failover" {
		about = "Promotes mirror topics without asking the source cluster (lost or unreachable); prints the offsets the " +
			"destination holds, which is where consumers resume."
	}
	c := newCommand("shale link "+sub, "shale link "+sub+" --link L [--topic T]... [flags]", about)
	var rf restFlags
	rf.register(c)
	link := c.fs.String("link", "", "the link's `name`")
	var topics []string
	c.fs.Func("topic", "a mirror `topic` (repeatable; default: all of the link's active mirrors)", func(v string) error {
		topics = append(topics, v)
		return nil
	})
	if _, code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	if *link == "" {
		return c.usageErr(stderr, "name the link with --link")
	}
	if topics == nil {
		topics = []string{}
	}
	var res struct {
		Data []mirrorInfo `json:"data"`
	}
	if err := rf.call(ctx, http.MethodPost, "/links/"+url.PathEscape(*link)+"/mirrors:"+sub, map[string]any{"mirror_topic_names": topics}, &res); err != nil {
		fmt.Fprintf(stderr, "shale link %s: %v\n", sub, err)
		return exitFailed
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSET\tSOURCE END\tLAG RECORDS\tLAG BYTES\tLAG AGE")
	failed := false
	for _, m := range res.Data {
		if m.Error != nil {
			fmt.Fprintf(stderr, "shale link %s: %s: %s\n", sub, m.MirrorTopicName, m.Error.Message)
			failed = true
			continue
		}
		for _, l := range m.Lags {
			if !m.LagKnown {
				fmt.Fprintf(tw, "%s\t%d\t%d\t-\t-\t-\t-\n", m.MirrorTopicName, l.Partition, l.Offset)
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", m.MirrorTopicName, l.Partition, l.Offset, l.SourceEnd, l.Lag, l.LagBytes,
				time.Duration(l.LagMs)*time.Millisecond)
		}
	}
	tw.Flush()
	if failed {
		return exitFailed
	}
	return exitOK
}
