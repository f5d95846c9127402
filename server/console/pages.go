package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// page is what every template gets.
type page struct {
	Title, Nav string
	User       string
	SASL       bool
	ReadOnly   bool
	CSRF       string
	// Errs are the Kafka errors met while reading the page, shown as they came.
	Errs []string
	Data any
}

func (p *page) fail(what string, err error) {
	if err != nil {
		p.Errs = append(p.Errs, what+": "+err.Error())
	}
}

var pageNames = []string{"overview", "topics", "topic", "groups", "group", "messages", "security", "login", "refused"}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.Handle("GET /console/static/", c.static)
	m.HandleFunc("GET /console/api/history", c.serveHistory)
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.HandleFunc("POST /logout", c.change(c.logout, false))
	m.HandleFunc("GET /{$}", c.viewer(c.overview))
	m.HandleFunc("GET /topics", c.viewer(c.topics))
	m.HandleFunc("GET /topic", c.viewer(c.topic))
	m.HandleFunc("GET /groups", c.viewer(c.groups))
	m.HandleFunc("GET /group", c.viewer(c.group))
	m.HandleFunc("GET /messages", c.viewer(c.messages))
	m.HandleFunc("POST /messages", c.change(c.produce, true))
	m.HandleFunc("GET /security", c.viewer(c.security))
	m.HandleFunc("POST /security", c.change(c.changeSecurity, true))
	c.mux = m
}

type handler func(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page)

func (c *Console) newPage(ss *session, nav, title string) *page {
	return &page{Title: title, Nav: nav, User: ss.user, SASL: c.opts.Kafka.SASL, ReadOnly: c.opts.ReadOnly, CSRF: ss.csrf}
}

// viewer runs a page's handler for a logged-in viewer and renders its template.
func (c *Console) viewer(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := c.session(w, r)
		if ss == nil {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		p := c.newPage(ss, "", "")
		h(ctx, w, r, ss, p)
	}
}

// change guards a POST: a session, its CSRF token, and console.read.only (when writes).
func (c *Console) change(h handler, writes bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := c.session(w, r)
		if ss == nil {
			c.refuse(w, http.StatusUnauthorized, "not logged in")
			return
		}
		if !validCSRF(ss, r) {
			c.refuse(w, http.StatusForbidden, "the request carries no valid CSRF token; reload the page and try again")
			return
		}
		if writes && c.opts.ReadOnly {
			c.refuse(w, http.StatusForbidden, "this console is read-only (console.read.only=true)")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		h(ctx, w, r, ss, c.newPage(ss, "", ""))
	}
}

func (c *Console) refuse(w http.ResponseWriter, code int, why string) {
	w.WriteHeader(code)
	c.render(w, "refused", &page{Title: "Refused", Errs: []string{why}, SASL: c.opts.Kafka.SASL})
}

func (c *Console) render(w http.ResponseWriter, name string, p *page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := c.tmpl[name].ExecuteTemplate(w, "layout", p); err != nil {
		c.lg.Warn("console template", "page", name, "err", err)
	}
}

// ---- login ----

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if !c.opts.Kafka.SASL {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c.render(w, "login", &page{Title: "Log in", SASL: true, Data: loginData{Mechanisms: c.opts.Kafka.Mechanisms, Next: safeNext(r.URL.Query().Get("next"))}})
}

type loginData struct {
	Mechanisms []string
	Next, User string
}

// safeNext keeps a redirect after login on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/"
	}
	return next
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.opts.Kafka.SASL {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	// A cross-site form cannot log a viewer in as someone else (login CSRF): browsers
	// send Origin on POST.
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			c.refuse(w, http.StatusForbidden, "cross-origin login refused")
			return
		}
	}
	user, pass, mechName := r.PostFormValue("user"), r.PostFormValue("password"), r.PostFormValue("mechanism")
	data := loginData{Mechanisms: c.opts.Kafka.Mechanisms, Next: safeNext(r.PostFormValue("next")), User: user}
	p := &page{Title: "Log in", SASL: true, Data: data}
	if !slices.Contains(c.opts.Kafka.Mechanisms, mechName) {
		p.Errs = []string{"mechanism " + mechName + " is not enabled on this listener"}
		w.WriteHeader(http.StatusBadRequest)
		c.render(w, "login", p)
		return
	}
	mech, err := mechanism(mechName, user, pass)
	if err == nil {
		err = c.checkLogin(r.Context(), mech)
	}
	if err != nil {
		p.Errs = []string{"login: " + err.Error()}
		w.WriteHeader(http.StatusUnauthorized)
		c.render(w, "login", p)
		return
	}
	ss := c.sessions.create(user, mech, &lazyClient{opts: append(c.clientOpts(), kgo.SASL(mech))})
	setSessionCookie(w, r, ss)
	http.Redirect(w, r, data.Next, http.StatusSeeOther)
}

// checkLogin authenticates mech against the listener with one ApiVersions round trip.
func (c *Console) checkLogin(ctx context.Context, mech sasl.Mechanism) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append(c.clientOpts(), kgo.SASL(mech), kgo.RequestRetries(0))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	return err
}

func (c *Console) logout(_ context.Context, w http.ResponseWriter, r *http.Request, ss *session, _ *page) {
	c.sessions.remove(ss.id)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	if c.opts.Kafka.SASL {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// ---- overview ----

type brokerRow struct {
	ID                 int32
	Rack, Addr         string
	Fenced, Controller bool
	Leaders, Replicas  int
}

type partRow struct {
	Topic                          string
	Partition, Leader              int32
	Replicas, ISR, Offline         []int32
	Start, End                     int64
	StartErr, EndErr, PartitionErr string
}

type quorumVoter struct {
	ID                  int32
	LogEnd, Lag         int64
	LastFetch, CaughtUp string
	Leader              bool
}

type overviewData struct {
	Cluster                   string
	Brokers                   []brokerRow
	QuorumLeader              int32
	QuorumEpoch               int32
	QuorumHW                  int64
	Voters, Observers         []quorumVoter
	UnderReplicated, Offline  []partRow
	Topics, Partitions        int
	Throughput                template.HTML
	PeersAsked, PeersAnswered int
	PeersUnknown              bool
}

func (c *Console) overview(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page) {
	p.Nav, p.Title = "overview", "Overview"
	d := overviewData{}
	_, adm, err := c.clients(ss)
	if err != nil {
		p.fail("client", err)
		c.render(w, "overview", p)
		return
	}
	md, err := adm.Metadata(ctx)
	p.fail("Metadata", err)
	d.Cluster = md.Cluster
	live := map[int32]*brokerRow{}
	for _, b := range md.Brokers {
		row := &brokerRow{ID: b.NodeID, Addr: fmt.Sprintf("%s:%d", b.Host, b.Port), Controller: b.NodeID == md.Controller}
		if b.Rack != nil {
			row.Rack = *b.Rack
		}
		live[b.NodeID] = row
	}
	// A broker that replicas name but Metadata does not list is fenced or down: Shale's
	// Metadata, as Kafka's, lists live brokers only.
	for _, t := range md.Topics {
		if t.Err != nil {
			continue
		}
		d.Topics++
		for _, pd := range t.Partitions {
			d.Partitions++
			for _, id := range pd.Replicas {
				row := live[id]
				if row == nil {
					row = &brokerRow{ID: id, Fenced: true}
					live[id] = row
				}
				row.Replicas++
			}
			if row := live[pd.Leader]; row != nil && pd.Leader >= 0 {
				row.Leaders++
			}
			pr := partRow{Topic: t.Topic, Partition: pd.Partition, Leader: pd.Leader, Replicas: pd.Replicas, ISR: pd.ISR, Offline: pd.OfflineReplicas}
			if pd.Leader < 0 {
				d.Offline = append(d.Offline, pr)
			} else if len(pd.ISR) < len(pd.Replicas) {
				d.UnderReplicated = append(d.UnderReplicated, pr)
			}
		}
	}
	for _, row := range live {
		d.Brokers = append(d.Brokers, *row)
	}
	sort.Slice(d.Brokers, func(i, j int) bool { return d.Brokers[i].ID < d.Brokers[j].ID })
	sortParts(d.UnderReplicated)
	sortParts(d.Offline)
	cl, _, _ := c.clients(ss)
	c.describeQuorum(ctx, cl, &d, p)

	visible := map[string]bool{}
	for t := range md.Topics {
		visible[t] = true
	}
	ins, asked, answered := c.mergedHistory(ctx, "in/")
	outs, _, _ := c.mergedHistory(ctx, "out/")
	d.PeersAsked, d.PeersAnswered = asked, answered
	in := sumSeries("in", filterTopics(ins, "in/", visible))
	out := sumSeries("out", filterTopics(outs, "out/", visible))
	d.Throughput = c.plot([]Series{in, out}, "records/s", []string{"in (appended)", "out (committed by groups)"})
	p.Data = d
	c.render(w, "overview", p)
}

func sortParts(ps []partRow) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
}

func (c *Console) describeQuorum(ctx context.Context, cl *kgo.Client, d *overviewData, p *page) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = errors.New("the answer names no partition")
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		p.fail("DescribeQuorum", err)
		return
	}
	qp := resp.Topics[0].Partitions[0]
	d.QuorumLeader, d.QuorumEpoch, d.QuorumHW = qp.LeaderID, qp.LeaderEpoch, qp.HighWatermark
	conv := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []quorumVoter {
		var out []quorumVoter
		for _, v := range rs {
			out = append(out, quorumVoter{ID: v.ReplicaID, LogEnd: v.LogEndOffset, Lag: max(qp.HighWatermark-v.LogEndOffset, 0),
				LastFetch: msTime(v.LastFetchTimestamp), CaughtUp: msTime(v.LastCaughtUpTimestamp), Leader: v.ReplicaID == qp.LeaderID})
		}
		return out
	}
	d.Voters = conv(qp.CurrentVoters)
	voter := map[int32]bool{}
	for _, v := range d.Voters {
		voter[v.ID] = true
	}
	// A combined node's broker fetches as an observer too; listed once, as the voter.
	for _, o := range conv(qp.Observers) {
		if !voter[o.ID] {
			d.Observers = append(d.Observers, o)
		}
	}
}

func msTime(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z")
}

// filterTopics keeps the series under prefix whose topic the viewer may describe.
func filterTopics(series []Series, prefix string, visible map[string]bool) []Series {
	var out []Series
	for _, s := range series {
		if t, ok := strings.CutPrefix(s.Name, prefix); ok && visible[t] {
			out = append(out, s)
		}
	}
	return out
}

// sumSeries adds series point-wise by timestamp.
func sumSeries(name string, series []Series) Series {
	by := map[int64]float64{}
	for _, s := range series {
		for _, p := range s.Points {
			by[p.T] += p.V
		}
	}
	out := Series{Name: name}
	for t, v := range by {
		out.Points = append(out.Points, Point{T: t, V: v})
	}
	sort.Slice(out.Points, func(i, j int) bool { return out.Points[i].T < out.Points[j].T })
	return out
}

func lastValue(s []Series, name string) (float64, bool) {
	for _, x := range s {
		if x.Name == name && len(x.Points) > 0 {
			return x.Points[len(x.Points)-1].V, true
		}
	}
	return 0, false
}

// ---- topics ----

type topicRow struct {
	Name            string
	Internal        bool
	Partitions, RF  int
	Size            string
	Retention       string
	In              string
	UnderReplicated int
}

func (c *Console) topics(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page) {
	p.Nav, p.Title = "topics", "Topics"
	_, adm, err := c.clients(ss)
	if err != nil {
		p.fail("client", err)
		c.render(w, "topics", p)
		return
	}
	md, err := adm.Metadata(ctx)
	p.fail("Metadata", err)
	names := md.Topics.Names()
	sort.Strings(names)
	retention := map[string]string{}
	if len(names) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, names...)
		p.fail("DescribeConfigs", err)
		for _, rc := range rcs {
			for _, cf := range rc.Configs {
				if cf.Key == "retention.ms" && cf.Value != nil {
					retention[rc.Name] = humanMs(*cf.Value)
				}
			}
		}
	}
	sizes, sizeErr := topicSizes(ctx, adm, md.Topics)
	if errors.Is(sizeErr, errUnsupported) {
		sizeErr = nil // said on the page
	}
	series, _, _ := c.mergedHistory(ctx, "in/")
	var rows []topicRow
	for _, name := range names {
		t := md.Topics[name]
		row := topicRow{Name: name, Internal: t.IsInternal, Partitions: len(t.Partitions), Retention: retention[name]}
		for _, pd := range t.Partitions {
			row.RF = max(row.RF, len(pd.Replicas))
			if len(pd.ISR) < len(pd.Replicas) {
				row.UnderReplicated++
			}
		}
		if sz, ok := sizes[name]; ok {
			row.Size = humanBytes(sz)
		} else {
			row.Size = "—"
		}
		if v, ok := lastValue(series, "in/"+name); ok {
			row.In = fmt.Sprintf("%.1f/s", v)
		}
		rows = append(rows, row)
	}
	if sizeErr != nil {
		p.fail("DescribeLogDirs (sizes)", sizeErr)
	}
	p.Data = rows
	c.render(w, "topics", p)
}

// topicSizes sums each topic's replicas' bytes over the brokers' log directories
// (DescribeLogDirs), leader and followers alike, as kafka-log-dirs.sh reports them.
func topicSizes(ctx context.Context, adm *kadm.Client, topics kadm.TopicDetails) (map[string]int64, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	set := kadm.TopicsSet{}
	for name, t := range topics {
		for _, pd := range t.Partitions {
			set.Add(name, pd.Partition)
		}
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		if errors.Is(err, kerr.UnsupportedVersion) || strings.Contains(err.Error(), "broker is too old") {
			return nil, errUnsupported
		}
		return nil, err
	}
	out := map[string]int64{}
	var firstErr error
	for _, byDir := range dirs {
		for _, d := range byDir {
			if d.Err != nil {
				if firstErr == nil {
					firstErr = d.Err
				}
				continue
			}
			for t, ps := range d.Topics {
				for _, pd := range ps {
					out[t] += pd.Size
				}
			}
		}
	}
	return out, firstErr
}

type configRow struct {
	Key, Value, Source string
	Sensitive          bool
}

type topicData struct {
	Name       string
	Internal   bool
	Partitions []partRow
	Configs    []configRow
	Throughput template.HTML
}

func (c *Console) topic(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page) {
	name := r.URL.Query().Get("name")
	p.Nav, p.Title = "topics", "Topic "+name
	_, adm, err := c.clients(ss)
	if err != nil {
		p.fail("client", err)
		c.render(w, "topic", p)
		return
	}
	d := topicData{Name: name}
	// Every topic, not this one by name: a Metadata request naming a missing topic may
	// create it where auto.create.topics.enable is on, and a page view must change nothing.
	tds, err := adm.ListTopicsWithInternal(ctx)
	p.fail("Metadata", err)
	td, ok := tds[name]
	if err == nil && (!ok || td.Err != nil) {
		if td.Err == nil {
			td.Err = kerr.UnknownTopicOrPartition
		}
		p.fail("Metadata", td.Err)
	}
	if ok && td.Err == nil {
		d.Internal = td.IsInternal
		starts, serr := adm.ListStartOffsets(ctx, name)
		p.fail("ListOffsets (earliest)", serr)
		ends, eerr := adm.ListEndOffsets(ctx, name)
		p.fail("ListOffsets (latest)", eerr)
		for _, pd := range td.Partitions.Sorted() {
			pr := partRow{Topic: name, Partition: pd.Partition, Leader: pd.Leader, Replicas: pd.Replicas, ISR: pd.ISR, Offline: pd.OfflineReplicas, Start: -1, End: -1}
			if pd.Err != nil {
				pr.PartitionErr = pd.Err.Error()
			}
			if o, ok := starts.Lookup(name, pd.Partition); ok {
				if o.Err != nil {
					pr.StartErr = o.Err.Error()
				} else {
					pr.Start = o.Offset
				}
			}
			if o, ok := ends.Lookup(name, pd.Partition); ok {
				if o.Err != nil {
					pr.EndErr = o.Err.Error()
				} else {
					pr.End = o.Offset
				}
			}
			d.Partitions = append(d.Partitions, pr)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, name)
		p.fail("DescribeConfigs", err)
		for _, rc := range rcs {
			if rc.Err != nil {
				p.fail("DescribeConfigs", rc.Err)
				continue
			}
			for _, cf := range rc.Configs {
				row := configRow{Key: cf.Key, Source: configSource(cf.Source), Sensitive: cf.Sensitive}
				if cf.Value != nil {
					row.Value = *cf.Value
				}
				d.Configs = append(d.Configs, row)
			}
		}
		sort.Slice(d.Configs, func(i, j int) bool { return d.Configs[i].Key < d.Configs[j].Key })
		series, _, _ := c.mergedHistory(ctx, "in/"+name)
		in := filterTopics(series, "in/", map[string]bool{name: true})
		d.Throughput = c.plot(in, "records/s", []string{"in (appended)"})
	}
	p.Data = d
	c.render(w, "topic", p)
}

func configSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "broker (dynamic)"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "cluster default (dynamic)"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "broker (static)"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	case kmsg.ConfigSourceDynamicBrokerLoggerConfig:
		return "broker logger"
	}
	return s.String()
}

// ---- groups ----

type groupRow struct {
	Name, Type, State, Protocol string
	Coordinator                 int32
	Lag                         string
}

func (c *Console) groups(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page) {
	p.Nav, p.Title = "groups", "Consumer groups"
	_, adm, err := c.clients(ss)
	if err != nil {
		p.fail("client", err)
		c.render(w, "groups", p)
		return
	}
	listed, err := adm.ListGroups(ctx)
	p.fail("ListGroups", err)
	var rows []groupRow
	var classic, share []string
	for _, g := range listed.Sorted() {
		typ := g.GroupType
		if typ == "" {
			typ = "classic"
		}
		rows = append(rows, groupRow{Name: g.Group, Type: typ, State: g.State, Protocol: g.ProtocolType, Coordinator: g.Coordinator})
		if typ == "share" {
			share = append(share, g.Group)
		} else {
			classic = append(classic, g.Group)
		}
	}
	lag := map[string]string{}
	if len(classic) > 0 {
		lags, err := adm.Lag(ctx, classic...)
		p.fail("group lag", err)
		for g, l := range lags {
			if l.Error() != nil {
				lag[g] = l.Error().Error()
				continue
			}
			lag[g] = strconv.FormatInt(l.Lag.Total(), 10)
		}
	}
	if len(share) > 0 {
		offs, err := adm.DescribeShareGroupOffsets(ctx, share...)
		p.fail("DescribeShareGroupOffsets", err)
		for g, d := range offs {
			if d.Err != nil {
				lag[g] = d.Err.Error()
				continue
			}
			var total int64
			for _, ps := range d.Offsets {
				for _, o := range ps {
					if o.Lag > 0 {
						total += o.Lag
					}
				}
			}
			lag[g] = strconv.FormatInt(total, 10)
		}
	}
	for i := range rows {
		rows[i].Lag = lag[rows[i].Name]
	}
	p.Data = rows
	c.render(w, "groups", p)
}

type memberRow struct {
	ID, ClientID, Host string
	Assignment         string
}

type groupLagRow struct {
	Topic          string
	Partition      int32
	Committed, End int64
	Lag            int64
	Member, Err    string
}

type groupData struct {
	Name, Type, State, Protocol string
	Coordinator                 int32
	Members                     []memberRow
	Lags                        []groupLagRow
	Total                       int64
	Plot                        template.HTML
}

func (c *Console) group(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page) {
	name := r.URL.Query().Get("id")
	p.Nav, p.Title = "groups", "Group "+name
	_, adm, err := c.clients(ss)
	if err != nil {
		p.fail("client", err)
		c.render(w, "group", p)
		return
	}
	d := groupData{Name: name}
	listed, err := adm.ListGroups(ctx)
	p.fail("ListGroups", err)
	lg, known := listed[name]
	switch {
	case err != nil:
	case !known:
		p.fail("ListGroups", fmt.Errorf("%w: no group %q is visible to this viewer", kerr.GroupIDNotFound, name))
	case lg.GroupType == "share":
		d.Type = "share"
		c.shareGroup(ctx, adm, &d, p)
	default:
		d.Type = lg.GroupType
		if d.Type == "" {
			d.Type = "classic"
		}
		c.classicGroup(ctx, adm, &d, p)
	}
	if known {
		series, _, _ := c.mergedHistory(ctx, "lag")
		d.Plot = c.lagPlot(series, name)
	}
	p.Data = d
	c.render(w, "group", p)
}

func (c *Console) classicGroup(ctx context.Context, adm *kadm.Client, d *groupData, p *page) {
	lags, err := adm.Lag(ctx, d.Name)
	if err != nil {
		p.fail("group lag", err)
		return
	}
	l := lags[d.Name]
	if l.Error() != nil {
		p.fail("DescribeGroups", l.Error())
	}
	d.State, d.Protocol, d.Coordinator = l.State, l.Protocol, l.Coordinator.NodeID
	for _, m := range l.Members {
		row := memberRow{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if a, ok := m.Assigned.AsConsumer(); ok {
			var parts []string
			for _, t := range a.Topics {
				parts = append(parts, fmt.Sprintf("%s %v", t.Topic, t.Partitions))
			}
			row.Assignment = strings.Join(parts, "; ")
		}
		d.Members = append(d.Members, row)
	}
	for _, ml := range l.Lag.Sorted() {
		row := groupLagRow{Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At, End: ml.End.Offset, Lag: ml.Lag}
		if ml.Member != nil {
			row.Member = ml.Member.ClientID + " (" + ml.Member.MemberID + ")"
		}
		if ml.Err != nil {
			row.Err = ml.Err.Error()
		} else if ml.Lag > 0 {
			d.Total += ml.Lag
		}
		d.Lags = append(d.Lags, row)
	}
}

func (c *Console) shareGroup(ctx context.Context, adm *kadm.Client, d *groupData, p *page) {
	ds, err := adm.DescribeShareGroups(ctx, d.Name)
	p.fail("ShareGroupDescribe", err)
	if g, ok := ds[d.Name]; ok {
		p.fail("ShareGroupDescribe", g.Err)
		d.State, d.Protocol, d.Coordinator = g.GroupState, g.Assignor, g.Coordinator.NodeID
		for _, m := range g.Members {
			var parts []string
			for _, t := range m.Assignment.Sorted() {
				parts = append(parts, fmt.Sprintf("%s %v", t.Topic, t.Partitions))
			}
			d.Members = append(d.Members, memberRow{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assignment: strings.Join(parts, "; ")})
		}
	}
	offs, err := adm.DescribeShareGroupOffsets(ctx, d.Name)
	p.fail("DescribeShareGroupOffsets", err)
	g := offs[d.Name]
	p.fail("DescribeShareGroupOffsets", g.Err)
	for t, ps := range g.Offsets {
		for part, o := range ps {
			row := groupLagRow{Topic: t, Partition: part, Committed: o.StartOffset, End: -1, Lag: o.Lag}
			if o.Err != nil {
				row.Err = o.Err.Error()
			} else if o.Lag > 0 {
				d.Total += o.Lag
			}
			d.Lags = append(d.Lags, row)
		}
	}
	sort.Slice(d.Lags, func(i, j int) bool {
		if d.Lags[i].Topic != d.Lags[j].Topic {
			return d.Lags[i].Topic < d.Lags[j].Topic
		}
		return d.Lags[i].Partition < d.Lags[j].Partition
	})
}

// lagPlot draws a group's total lag and, for up to maxLines partitions, each one's.
func (c *Console) lagPlot(series []Series, group string) template.HTML {
	const maxLines = 8
	var lines []Series
	var labels []string
	for _, s := range series {
		if s.Name == lagTotalSeries(group) {
			lines = append([]Series{s}, lines...)
			labels = append([]string{"total"}, labels...)
		}
	}
	for _, s := range series {
		rest, ok := strings.CutPrefix(s.Name, "lag/"+group+"/")
		// topic names hold no "/": a longer rest belongs to a group whose id extends this one
		if !ok || strings.Count(rest, "/") != 1 || len(lines) > maxLines {
			continue
		}
		lines = append(lines, s)
		labels = append(labels, strings.Replace(rest, "/", " #", 1))
	}
	return c.plot(lines, "records behind", labels)
}

// ---- security ----

type userRow struct {
	User, Mechanisms, Err string
	// Creds are the mechanisms the user has a credential for (SCRAM-SHA-256, -512).
	Creds []string
}

type aclRow struct {
	Principal, Host, Resource, Name, Pattern, Operation, Permission string
}

type quotaRow struct {
	Entity, Values string
	// Comps and Keys let a form name the entity and each key to remove.
	Comps []quotaComp
	Keys  []string
}

type quotaComp struct {
	Type, Name string
	Default    bool
}

type securityData struct {
	Users  []userRow
	ACLs   []aclRow
	Quotas []quotaRow
	// Done is what the last change did (POST-redirect-GET).
	Done      string
	QuotaKeys []string
	// MayAlter (ACLs, SCRAM users) and MayAlterConfigs (quotas) are the viewer's
	// operations on the cluster: without them the page offers no forms.
	MayAlter, MayAlterConfigs bool
}

func (c *Console) security(ctx context.Context, w http.ResponseWriter, r *http.Request, ss *session, p *page) {
	p.Nav, p.Title = "security", "Security"
	cl, adm, err := c.clients(ss)
	if err != nil {
		p.fail("client", err)
		c.render(w, "security", p)
		return
	}
	d := securityData{Done: r.URL.Query().Get("done"), QuotaKeys: quotaKeys}
	if !c.opts.ReadOnly {
		d.MayAlter, d.MayAlterConfigs = mayChange(ctx, cl)
	}
	users, err := adm.DescribeUserSCRAMs(ctx)
	p.fail("DescribeUserScramCredentials", err)
	for _, u := range users.Sorted() {
		row := userRow{User: u.User}
		var ms []string
		for _, ci := range u.CredInfos {
			ms = append(ms, fmt.Sprintf("%s (%d iterations)", ci.Mechanism, ci.Iterations))
			row.Creds = append(row.Creds, ci.Mechanism.String())
		}
		row.Mechanisms = strings.Join(ms, ", ")
		if u.Err != nil {
			row.Err = u.Err.Error()
		}
		d.Users = append(d.Users, row)
	}
	// Every ACL: ANY resource type, pattern, operation and permission.
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		if err = kerr.ErrorForCode(resp.ErrorCode); err != nil && resp.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
	}
	p.fail("DescribeAcls", err)
	if err == nil {
		for _, res := range resp.Resources {
			for _, a := range res.ACLs {
				d.ACLs = append(d.ACLs, aclRow{Principal: a.Principal, Host: a.Host, Resource: res.ResourceType.String(), Name: res.ResourceName,
					Pattern: res.ResourcePatternType.String(), Operation: a.Operation.String(), Permission: a.PermissionType.String()})
			}
		}
	}
	sort.Slice(d.ACLs, func(i, j int) bool {
		a, b := d.ACLs[i], d.ACLs[j]
		return a.Principal+a.Resource+a.Name+a.Operation < b.Principal+b.Resource+b.Name+b.Operation
	})
	quotas, err := adm.DescribeClientQuotas(ctx, false, nil)
	p.fail("DescribeClientQuotas", err)
	for _, q := range quotas {
		var vs []string
		row := quotaRow{Entity: q.Entity.String()}
		for _, v := range q.Values {
			vs = append(vs, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
			row.Keys = append(row.Keys, v.Key)
		}
		for _, e := range q.Entity {
			qc := quotaComp{Type: e.Type, Default: e.Name == nil}
			if e.Name != nil {
				qc.Name = *e.Name
			}
			row.Comps = append(row.Comps, qc)
		}
		row.Values = strings.Join(vs, ", ")
		d.Quotas = append(d.Quotas, row)
	}
	p.Data = d
	c.render(w, "security", p)
}

// ---- formatting ----

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func humanMs(v string) string {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		if ms == -1 {
			return "forever"
		}
		return v
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

var funcs = template.FuncMap{
	"join": func(ids []int32) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = strconv.Itoa(int(id))
		}
		return strings.Join(s, ", ")
	},
	"q":    url.QueryEscape,
	"list": func(s ...string) []string { return s },
}

// errUnsupported marks an API the brokers do not serve.
var errUnsupported = errors.New("not served by the brokers")

func sortStrings(s []string) { sort.Strings(s) }
