//go:build integration

package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Paths of the deployed files, relative to this directory.
const (
	alertsFile    = "prometheus/alerts.yml"
	promFile      = "prometheus/prometheus.yml"
	dashboardFile = "grafana/sweepgate.json"
	composeFile   = "compose.yaml"
)

// ruleFile is a Prometheus rule file, with the fields Prometheus reads; an
// unknown field fails the decoding, as it fails Prometheus.
type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert         string            `yaml:"alert"`
	Record        string            `yaml:"record"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for"`
	KeepFiringFor string            `yaml:"keep_firing_for"`
	Labels        map[string]string `yaml:"labels"`
	Annotations   map[string]string `yaml:"annotations"`
}

// promDuration is Prometheus's duration syntax: 0s, 15m, 1h30m, 1d.
var promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)

func decodeStrict(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// exportedNames is the set of series names sweepgate exports, from the
// real registrations.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	return seriesNames(wire(t).gather(t))
}

// prometheusMade are the series Prometheus itself writes for every target.
var prometheusMade = map[string]bool{"up": true}

// runbook is the document the alerts' runbook_url annotations point into,
// one section per alert, and runbookURL the address it is read at.
const (
	runbook    = "../docs/runbook.md"
	runbookURL = "https://github.com/sweepgate/sweepgate/blob/main/docs/runbook.md"
)

// checkExpr fails t when expr names a metric that is not exported.
func checkExpr(t *testing.T, where, expr string, exported map[string]bool) []string {
	t.Helper()
	names, err := metricNames(expr)
	if err != nil {
		t.Errorf("%s: %v\n%s", where, err, expr)
		return nil
	}
	if len(names) == 0 {
		t.Errorf("%s names no metric: %s", where, expr)
	}
	for _, n := range names {
		if !exported[n] && !prometheusMade[n] {
			t.Errorf("%s uses %s, which sweepgate does not export", where, n)
		}
	}
	return names
}

// TestAlertRules checks that the rules parse as Prometheus rule groups,
// that every alert says how long, how bad and what, that the alerts an
// operator needs are there, and that they name only exported metrics.
func TestAlertRules(t *testing.T) {
	exported := exportedNames(t)
	var rf ruleFile
	decodeStrict(t, alertsFile, &rf)
	if len(rf.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	alerts := map[string]rule{}
	groups := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("group name %q is empty or repeated", g.Name)
		}
		groups[g.Name] = true
		if len(g.Rules) == 0 {
			t.Errorf("group %s has no rules", g.Name)
		}
		for _, r := range g.Rules {
			where := fmt.Sprintf("group %s, rule %s%s", g.Name, r.Alert, r.Record)
			switch {
			case r.Record != "":
				t.Errorf("%s: a recording rule; this file holds alerts only", where)
				continue
			case r.Alert == "":
				t.Errorf("%s: no alert name", where)
				continue
			case alerts[r.Alert].Alert != "":
				t.Errorf("%s: alert name repeated", where)
			}
			alerts[r.Alert] = r
			if !promDuration.MatchString(r.For) {
				t.Errorf("%s: for %q is not a Prometheus duration", where, r.For)
			}
			if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", where, sev)
			}
			if strings.TrimSpace(r.Annotations["summary"]) == "" {
				t.Errorf("%s: no summary annotation", where)
			}
			if strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s: no expr", where)
				continue
			}
			checkExpr(t, where, r.Expr, exported)
			checkRunbook(t, where, r)
		}
	}
	// What the rules must catch, and the metric each must read.
	for _, want := range []struct{ alert, metric string }{
		{"SweepgateReclaimBreakerRefused", "sweepgate_reclaim_breaker_refusals_total"},
		{"SweepgateDigestBreakerRefused", "sweepgate_reclaim_digest_breaker_refusals_total"},
		{"SweepgateOrphansHeldLong", "sweepgate_reclaim_oldest_orphan_age_seconds"},
		{"SweepgateSessionStuckCompleting", "sweepgate_sessions_stuck"},
		{"SweepgateNoReclaimerLeader", "sweepgate_reclaim_leading"},
		{"SweepgateReclaimPassesFailing", "sweepgate_reclaim_passes_total"},
		{"SweepgateUnknownProducerReferences", "sweepgate_reclaim_unknown_producer_refs_total"},
		{"SweepgateDown", "up"},
		{"SweepgateEtcdMemberDown", "sweepgate_etcd_up"},
		{"SweepgateEtcdNearQuota", "sweepgate_etcd_db_quota_bytes"},
		{"SweepgatePlaneSilent", "sweepgate_digests_plane_report_age_seconds"},
	} {
		r, ok := alerts[want.alert]
		if !ok {
			t.Errorf("no alert %s", want.alert)
			continue
		}
		if names, _ := metricNames(r.Expr); !slices.Contains(names, want.metric) {
			t.Errorf("alert %s does not read %s: %s", want.alert, want.metric, r.Expr)
		}
	}
}

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// labelValues matches a Grafana label_values(METRIC_SELECTOR, LABEL) query.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// TestDashboard checks that the dashboard parses, that every panel
// queries something, that it shows what an operator needs, and that it names
// only exported metrics.
func TestDashboard(t *testing.T) {
	exported := exportedNames(t)
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q, uid %q: both are needed for provisioning", d.Title, d.UID)
	}
	var flat []panel
	for _, p := range d.Panels {
		flat = append(flat, p)
		flat = append(flat, p.Panels...)
	}
	used, queries := checkPanels(t, flat, exported)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Errorf("variable %s: query %s", v.Name, v.Query)
				continue
			}
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(METRIC, LABEL)", v.Name, q.Query)
			continue
		}
		checkExpr(t, "variable "+v.Name, m[1], exported)
	}
	if queries < 20 {
		t.Errorf("only %d queries", queries)
	}
	// What the dashboard must show.
	for _, want := range []string{
		"sweepgate_requests_total",                               // request rate, error ratio
		"sweepgate_request_duration_seconds_bucket",              // latency by operation
		"sweepgate_backend_request_duration_seconds_bucket",      // backend latency
		"sweepgate_etcd_request_duration_seconds_bucket",         // etcd latency
		"sweepgate_sessions",                                     // sessions by state
		"sweepgate_sessions_stuck",                               // stuck sessions
		"sweepgate_reclaim_passes_total",                         // passes
		"sweepgate_reclaim_deleted_parts_total",                  // reclaimed: parts
		"sweepgate_reclaim_deleted_bytes_total",                  // and bytes
		"sweepgate_reclaim_digest_deleted_total",                 // deleted blobs
		"sweepgate_reclaim_digest_deleted_bytes_total",           // and bytes
		"sweepgate_reclaim_tombstones",                           // tombstones by state
		"sweepgate_reclaim_orphans_held",                         // held orphans
		"sweepgate_reclaim_oldest_orphan_age_seconds",            // and for how long
		"sweepgate_reclaim_leading",                              // leader
		"sweepgate_reclaim_term",                                 // term
		"sweepgate_reclaim_breaker_refusals_total",               // breaker
		"sweepgate_reclaim_digest_breaker_refusals_total",        // digest breaker
		"sweepgate_reclaim_unknown_producer_refs_total",          // unknown producers
		"sweepgate_reclaim_last_pass_finished_timestamp_seconds", // passes falling behind
	} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}

// checkPanels checks each panel's id, title, place on the grid, data source
// and queries, and returns the metrics the queries use and their number.
func checkPanels(t *testing.T, panels []panel, exported map[string]bool) (used map[string]bool, queries int) {
	t.Helper()
	used = map[string]bool{}
	ids := map[int]bool{}
	for _, p := range panels {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID == 0 || ids[p.ID] {
			t.Errorf("%s: id missing or repeated", where)
		}
		ids[p.ID] = true
		if p.Title == "" {
			t.Errorf("%s: no title", where)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v does not fit the 24-column grid", where, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" {
			t.Errorf("%s: no Prometheus data source", where)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no targets", where)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: refId %q missing or repeated", where, tg.RefID)
			}
			refs[tg.RefID] = true
			queries++
			for _, n := range checkExpr(t, where, tg.Expr, exported) {
				used[n] = true
			}
		}
	}
	return used, queries
}

// decodeYAML decodes a YAML file, failing t on an error.
func decodeYAML(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestReadmeLinksDeploy keeps the multi-node set-up findable from the
// repository's README.
func TestReadmeLinksDeploy(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("(deploy/README.md)")) {
		t.Error("README.md does not link deploy/README.md")
	}
}

// checkRunbook fails t unless r's runbook_url names a section of
// docs/runbook.md headed with the alert's name (GitHub's anchor for it:
// the name lowercased).
func checkRunbook(t *testing.T, where string, r rule) {
	t.Helper()
	doc, err := os.ReadFile(runbook)
	if err != nil {
		t.Fatal(err)
	}
	if want := runbookURL + "#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
		t.Errorf("%s: runbook_url %q, want %q", where, r.Annotations["runbook_url"], want)
	}
	if !slices.Contains(strings.Split(string(doc), "\n"), "## "+r.Alert) {
		t.Errorf("%s: %s has no section headed \"## %s\"", where, runbook, r.Alert)
	}
}
