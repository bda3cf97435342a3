//go:build integration

package deploy

import (
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reload"
)

// family is one metric family as registered: its name, the names of its
// labels (variable and constant) and whether it is a histogram or summary,
// which decides the series names it exposes.
type family struct {
	name   string
	labels []string
	kind   string // "histogram", "summary" or "" for a single series per label set
}

// recorder is a registry that also keeps the descriptor of everything
// registered on it. A Gather shows only the vectors that already have a
// child; the descriptors show every family, observed or not.
type recorder struct {
	*prometheus.Registry

	mu       sync.Mutex
	families map[string]*family
}

func newRecorder() *recorder {
	return &recorder{Registry: prometheus.NewRegistry(), families: map[string]*family{}}
}

// descPattern reads a descriptor's String(): the only way to its name and
// labels that client_golang offers.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", help: .*, constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// Register implements prometheus.Registerer.
func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	kind := ""
	switch c.(type) {
	case *prometheus.HistogramVec:
		kind = "histogram"
	case *prometheus.SummaryVec:
		kind = "summary"
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		m := descPattern.FindStringSubmatch(d.String())
		if m == nil {
			return fmt.Errorf("cannot read descriptor %s", d)
		}
		f := &family{name: m[1], kind: kind}
		for _, lp := range splitLabels(m[2]) {
			name, _, _ := strings.Cut(lp, "=")
			f.labels = append(f.labels, name)
		}
		for _, vl := range splitLabels(m[3]) {
			// A constrained label prints as c(name).
			f.labels = append(f.labels, strings.TrimSuffix(strings.TrimPrefix(vl, "c("), ")"))
		}
		r.families[f.name] = f
	}
	return nil
}

// MustRegister implements prometheus.Registerer.
func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// splitLabels splits a descriptor's comma-separated label list; constant
// label values are quoted, and may hold commas.
func splitLabels(s string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

// wire builds the gateway (sessions and digests on), the session gauge,
// the reclaimer (with the digest sweep), the reloader and the timed etcd
// store over a real embedded etcd, registering their metrics on one
// recorder as serve does (see newServer in cmd/sweepgate; its build_info
// gauge and dropped-log-lines counter are the families left out). Nothing runs: registering is all it takes.
func wire(t *testing.T) *recorder {
	t.Helper()
	cfg, err := config.Load([]string{
		"--backend-endpoint", "http://127.0.0.1:1",
		"--backend-access-key", "metrics", "--backend-secret-key", "metrics-secret",
		"--digests-namespace", "registry/blobs/sha256/",
		"--digests-source", "registry/manifests/",
		"--digests-planes", "backup",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	layout, err := cfg.Layout()
	if err != nil {
		t.Fatal(err)
	}
	reg := newRecorder()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	e, cli := etcdtest.Start(t)
	reg.MustRegister(etcdstore.NewStatusCollector(cli, e.Endpoints()))
	etcdstore.NewAvailability(cli, time.Second, etcdstore.DefaultRequestTimeout, reg)
	keys, err := etcdstore.NewKeys(cfg.Etcd.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	store := etcdstore.NewStore(cli, keys).WithMetrics(reg)
	reg.MustRegister(digestsweep.NewPlaneCollector(store, cfg.Digests.Planes, time.Now))
	logger := slog.New(slog.DiscardHandler)
	be, err := backend.NewStatic(cfg.Backend.Endpoint, "", cfg.Backend.AccessKey, string(cfg.Backend.SecretKey))
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := multipart.New(multipart.Config{Store: store, Backend: be, Logger: logger, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := digests.NewService(digests.ServiceConfig{Store: store, Layout: layout, Parts: store, Sessions: sessions, Backend: be, Logger: logger, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.New(gateway.Config{
		Backend:     be,
		Credentials: []sigv4.Credential{{AccessKey: "metrics", SecretKey: "metrics-secret", Principal: "metrics"}},
		Logger:      logger,
		Metrics:     reg,
		Sessions:    sessions,
		Digests:     blobs,
	}); err != nil {
		t.Fatal(err)
	}
	reload.New(cfg, nil, logger, reg)
	if _, err := multipart.NewStateGauge(store, reg, logger); err != nil {
		t.Fatal(err)
	}
	if _, err := reclaim.New(reclaim.Config{
		Store:    store,
		Sessions: sessions,
		Backend:  be,
		ID:       "deploy-test",
		Logger:   logger,
		Metrics:  reg,
		Digests:  &digestsweep.SweepConfig{Layout: layout},
	}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// gather returns every registered family, by name, with the kinds of
// the ones a Gather shows (the Go collector's histograms among them).
func (r *recorder) gather(t *testing.T) map[string]*family {
	t.Helper()
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, mf := range mfs {
		f, ok := r.families[mf.GetName()]
		if !ok {
			t.Fatalf("gathered %s, which no collector described", mf.GetName())
		}
		switch mf.GetType().String() {
		case "HISTOGRAM", "GAUGE_HISTOGRAM":
			f.kind = "histogram"
		case "SUMMARY":
			f.kind = "summary"
		}
		// Labels a collector adds at collect time count too.
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(f.labels, lp.GetName()) {
					f.labels = append(f.labels, lp.GetName())
				}
			}
		}
	}
	return r.families
}

// seriesNames returns the names of the series the families expose, which
// are what PromQL selects: a classic histogram exposes NAME_bucket,
// NAME_sum and NAME_count and no series named NAME.
func seriesNames(fams map[string]*family) map[string]bool {
	out := map[string]bool{}
	for name, f := range fams {
		switch f.kind {
		case "histogram":
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case "summary":
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
