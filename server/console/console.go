package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/server/schemaregistry"
)

//go:embed web
var webFS embed.FS

// Defaults: a point every 10 s for an hour, as the plots show.
const (
	DefaultSampleInterval = 10 * time.Second
	DefaultWindow         = time.Hour
	// defaultMaxSeries bounds the history's memory: 20,000 series of 360 points of
	// 16 bytes is about 115 MB at worst; a lag series per group partition is what grows.
	defaultMaxSeries = 20000
	sessionIdle      = 30 * time.Minute
	sessionMax       = 12 * time.Hour
	requestTimeout   = 10 * time.Second
)

// Kafka says how the console reaches its node's Kafka listener.
type Kafka struct {
	// Addr is the listener's host:port.
	Addr string
	// Opts are the client options the listener needs besides SASL (a TLS dialer).
	Opts []kgo.Opt
	// SASL is true when the listener authenticates with SASL: viewers log in, and the
	// console dials Kafka as them.
	SASL bool
	// Mechanisms are the SASL mechanisms offered at the login page (PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512).
	Mechanisms []string
	// ServiceOpts authenticate the sampler, which runs for no viewer (the node's own
	// inter-broker credentials on a SASL listener). What it samples is shown to a viewer
	// only for the topics and groups that viewer's own client may describe.
	ServiceOpts []kgo.Opt
}

// Options configure a Console.
type Options struct {
	Kafka    Kafka
	ReadOnly bool
	// Clock is the sampler's time; WallClock when nil.
	Clock Clock
	// SampleInterval and Window size the history (10 s and 1 h when zero).
	SampleInterval, Window time.Duration
	// Peers returns the base URLs (http://host:port) of the other nodes' consoles, whose
	// histories a page merges with this node's. When nil and DiscoverPeers is set, they
	// are found from each other broker's DescribeConfigs answer (http.listener).
	Peers         func() []string
	DiscoverPeers bool
	// NodeID is this node's id, left out of the discovered peers.
	NodeID int32
	// PeerToken, when set, is required of /console/api/history requests (in the
	// X-Shale-Console-Peer header) and sent with this node's own: on a cluster that
	// requires authentication the history, which names topics and groups, is for the
	// other nodes only. Every node must be given the same token.
	PeerToken string
	// SchemaRegistry returns the built-in schema registry's current state, by which the
	// messages page decodes keys and values in Confluent's wire format (magic byte 0 and
	// a schema id); nil, or returning nil, shows them as text or hex.
	SchemaRegistry func() *metadata.SchemaRegistry
	// HTTP fetches the peers' histories; http.DefaultClient's transport when nil.
	HTTP   *http.Client
	Logger *slog.Logger
}

// Console serves the pages. Run samples the history until its context ends.
type Console struct {
	opts    Options
	clock   Clock
	lg      *slog.Logger
	hist    *History
	tmpl    map[string]*template.Template
	static  http.Handler
	mux     *http.ServeMux
	httpc   *http.Client
	service *lazyClient
	smp     *sampler
	// shared is the viewers' client when the listener has no SASL: every viewer is the
	// same (anonymous or certificate) principal.
	shared    *lazyClient
	sessions  *sessions
	peerCache peerCache
	serde     *schemaregistry.Serde
}

// New builds a console; it dials nothing until a page or the sampler needs Kafka.
func New(opts Options) (*Console, error) {
	if opts.Clock == nil {
		opts.Clock = WallClock{}
	}
	if opts.SampleInterval <= 0 {
		opts.SampleInterval = DefaultSampleInterval
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: 5 * time.Second}
	}
	// Each page is the layout with its own "content": parsed apart so that the pages'
	// definitions do not replace each other.
	base, err := template.New("").Funcs(funcs).ParseFS(webFS, "web/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	tmpl := map[string]*template.Template{}
	for _, name := range pageNames {
		t := template.Must(base.Clone())
		if tmpl[name], err = t.ParseFS(webFS, "web/"+name+".html"); err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
	}
	static, err := fs.Sub(webFS, "web/static")
	if err != nil {
		return nil, fmt.Errorf("console static files: %w", err)
	}
	c := &Console{
		opts:     opts,
		clock:    opts.Clock,
		lg:       opts.Logger.With("component", "console"),
		hist:     NewHistory(opts.Window, opts.SampleInterval, defaultMaxSeries),
		tmpl:     tmpl,
		static:   http.StripPrefix("/console/static/", http.FileServerFS(static)),
		httpc:    opts.HTTP,
		sessions: newSessions(opts.Clock),
		serde:    schemaregistry.NewSerde(),
	}
	c.smp = &sampler{c: c}
	c.service = &lazyClient{opts: c.clientOpts(opts.Kafka.ServiceOpts...)}
	if !opts.Kafka.SASL {
		c.shared = &lazyClient{opts: c.clientOpts()}
	}
	c.routes()
	return c, nil
}

// History is the node's own history.
func (c *Console) History() *History { return c.hist }

// ServeHTTP serves every page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The pages are not to be framed by other sites (clickjacking) nor to load anything
	// from elsewhere: everything the console needs is embedded.
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	c.mux.ServeHTTP(w, r)
}

// Close closes the console's Kafka clients and ends every session.
func (c *Console) Close() {
	c.service.close()
	if c.shared != nil {
		c.shared.close()
	}
	c.sessions.closeAll()
}

// clientOpts are the options of every client the console makes, extra last.
func (c *Console) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.opts.Kafka.Addr),
		kgo.ClientID("shale-console"),
		kgo.RetryTimeout(5 * time.Second),
		kgo.RequestRetries(2),
		kgo.MetadataMinAge(time.Second),
		kgo.WithLogger(nil),
	}
	opts = append(opts, c.opts.Kafka.Opts...)
	return append(opts, extra...)
}

// lazyClient is a kgo client made at first use: the node's Kafka listener starts after
// its HTTP listener, and a broker may not be up when the console is.
type lazyClient struct {
	opts []kgo.Opt
	mu   sync.Mutex
	cl   *kgo.Client
}

func (l *lazyClient) get() (*kgo.Client, *kadm.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cl == nil {
		cl, err := kgo.NewClient(l.opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("console client: %w", err)
		}
		l.cl = cl
	}
	return l.cl, kadm.NewClient(l.cl), nil
}

func (l *lazyClient) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cl != nil {
		l.cl.Close()
		l.cl = nil
	}
}

// peerHeader carries Options.PeerToken.
const peerHeader = "X-Shale-Console-Peer"

// serveHistory answers /console/api/history: this node's own series as JSON (never the
// merged ones, so that nodes asking each other do not echo).
func (c *Console) serveHistory(w http.ResponseWriter, r *http.Request) {
	if tok := c.opts.PeerToken; tok != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(peerHeader)), []byte(tok)) != 1 {
		http.Error(w, "the console's history is served to the other nodes only", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		IntervalMs int64    `json:"interval_ms"`
		Series     []Series `json:"series"`
	}{c.opts.SampleInterval.Milliseconds(), c.hist.Snapshot(r.URL.Query().Get("prefix"))})
}

// mergedHistory is this node's series with prefix merged with every peer's that
// answers in time; peers that fail are skipped (the page says how many answered).
func (c *Console) mergedHistory(ctx context.Context, prefix string) (series []Series, peersAsked, peersAnswered int) {
	sets := [][]Series{c.hist.Snapshot(prefix)}
	peers := c.peers(ctx)
	if len(peers) == 0 {
		return sets[0], 0, 0
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.fetchPeer(ctx, p, prefix)
			if err != nil {
				c.lg.Debug("peer history", "peer", p, "err", err)
				return
			}
			mu.Lock()
			sets = append(sets, s)
			peersAnswered++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return Merge(c.opts.SampleInterval, sets...), len(peers), peersAnswered
}

func (c *Console) fetchPeer(ctx context.Context, base, prefix string) ([]Series, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/console/api/history?prefix="+urlQueryEscape(prefix), nil)
	if err != nil {
		return nil, err
	}
	if c.opts.PeerToken != "" {
		req.Header.Set(peerHeader, c.opts.PeerToken)
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("peer history: %s", resp.Status)
	}
	var body struct {
		Series []Series `json:"series"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("peer history: %w", err)
	}
	return body.Series, nil
}
