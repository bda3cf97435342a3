//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/e2e/harness"
)

// shAdmin checks the admin API and the commands per shard, through
// gateway g0 (whichever shards it leads): the sessions each shard holds,
// listed per shard, of every shard and shown by bucket; every shard's
// reclaimer status with its own leader and term; a pass run on shard reg
// through the API on its leader; an upload on shard logs explained; and an
// unknown shard refused. done are the completed uploads by shard name.
func shAdmin(t *testing.T, gateways []*harness.Gateway, shards []*shard, leaders map[string]int, terms map[string]int64, done map[string]string) {
	t.Helper()
	admin := gateways[0].AdminEndpoint
	list := func(args ...string) adminapi.SessionList {
		t.Helper()
		var l adminapi.SessionList
		out := mustSweepgate(t, 0, admin, append([]string{"sessions", "list", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("sessions list %v: %v\n%s", args, err, out)
		}
		return l
	}
	holds := func(l adminapi.SessionList, sh *shard) (ok bool, others []string) {
		for _, s := range l.Sessions {
			if s.Bucket == sh.bucket && s.UploadID == done[sh.name] && s.Shard == sh.name {
				ok = true
			}
			if s.Bucket != sh.bucket || s.Shard != sh.name {
				others = append(others, s.Shard+":"+s.Bucket)
			}
		}
		return ok, others
	}
	for _, sh := range shards {
		args := []string{"--shard", sh.name}
		if sh.name == "main" {
			args = nil // the default shard
		}
		if ok, others := holds(list(args...), sh); !ok || len(others) > 0 {
			t.Errorf("sessions list %v: has %s's upload %v, sessions of other shards %v", args, sh.name, ok, others)
		}
	}
	all := list("--shard", "all")
	for _, sh := range shards {
		if ok, _ := holds(all, sh); !ok {
			t.Errorf("sessions list --shard all lacks shard %s's upload: %+v", sh.name, all.Sessions)
		}
	}
	logs := shards[1]
	out := mustSweepgate(t, 0, admin, "sessions", "show", logs.bucket, done["logs"])
	if !strings.Contains(out, "Shard") || !strings.Contains(out, "logs") {
		t.Errorf("sessions show of shard logs' upload:\n%s", out)
	}
	// explain goes to the bucket's shard, whose session it reads.
	var ex adminapi.UploadExplanation
	out = mustSweepgate(t, 0, admin, "explain", "--json", logs.bucket, done["logs"])
	if err := json.Unmarshal([]byte(out), &ex); err != nil || ex.Session == nil {
		t.Errorf("explain of shard logs' upload: %v\n%s", err, out)
	}

	// Every shard's reclaimer status names its own leader and term.
	var st adminapi.ShardStatuses
	out = mustSweepgate(t, 0, admin, "reclaim", "status", "--shard", "all", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Shards) != len(shards) {
		t.Fatalf("reclaim status --shard all: %v\n%s", err, out)
	}
	for i, sh := range shards {
		s := st.Shards[i].Status
		// A reclaimer campaigns as host@admin-address.
		leader := "@" + strings.TrimPrefix(gateways[leaders[sh.name]].AdminEndpoint, "http://")
		if st.Shards[i].Shard != sh.name || s == nil || s.Shard != sh.name || s.Reclaimer.Leader == nil || s.Reclaimer.Leader.Term != terms[sh.name] ||
			!strings.HasSuffix(s.Reclaimer.Leader.ID, leader) {
			t.Errorf("reclaim status of shard %s: %+v; want the leader *%s in term %d", sh.name, st.Shards[i], leader, terms[sh.name])
		}
	}
	out = mustSweepgate(t, 0, admin, "reclaim", "status", "--shard", "logs")
	if want := fmt.Sprintf("term %d", terms["logs"]); !strings.Contains(out, "Shard: logs") || !strings.Contains(out, want) {
		t.Errorf("reclaim status --shard logs: want shard logs and %q\n%s", want, out)
	}
	if code, _, errOut := sweepgateCmd(t, admin, "reclaim", "status", "--shard", "nope"); code != 2 || !strings.Contains(errOut, `unknown shard "nope"`) {
		t.Errorf("reclaim status --shard nope: exit %d, want 2 naming the shard\n%s", code, errOut)
	}

	// The status page shows every shard's leader and term.
	code, page := shAdminCall(t, gateways[0], http.MethodGet, "/status", "")
	for _, sh := range shards {
		want := fmt.Sprintf(`data-metric="shard.%s.leader.term" data-value="%d"`, sh.name, terms[sh.name])
		if code != http.StatusOK || !strings.Contains(string(page), want) {
			t.Errorf("status page: %d, want %s", code, want)
		}
	}

	// A pass on shard reg, through the API of its leader, in its term.
	reg := gateways[leaders["reg"]]
	code, body := shAdminCall(t, reg, http.MethodPost, "/admin/v1/reclaim/run?shard=reg", "{}")
	var rep adminapi.Report
	if code != http.StatusOK || json.Unmarshal(body, &rep) != nil || rep.Term != terms["reg"] || rep.Pass == 0 {
		t.Errorf("POST /admin/v1/reclaim/run?shard=reg on its leader: %d %s; want a pass in term %d", code, body, terms["reg"])
	}

	shStreamedPass(t, gateways[leaders["logs"]], "logs", terms["logs"])
	shMigrate(t, gateways[0], gateways[leaders["reg"]], shards, terms)
}

// shStreamedPass runs a pass of shard name, not the default, through the
// API of its leader g with its progress streamed: every line, progress
// and report, is of that shard's reclaimer, in its term.
func shStreamedPass(t *testing.T, g *harness.Gateway, name string, term int64) {
	t.Helper()
	code, body := shAdminCall(t, g, http.MethodPost, "/admin/v1/reclaim/run?shard="+name+"&progress=true", "{}")
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if code != http.StatusOK || len(lines) == 0 {
		t.Fatalf("streamed pass of shard %s: %d %s", name, code, body)
	}
	for i, line := range lines {
		var l adminapi.StreamLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("streamed pass of shard %s, line %d: %v\n%s", name, i, err, body)
		}
		last := i == len(lines)-1
		switch {
		case !last && (l.Progress == nil || l.Progress.Term != term):
			t.Errorf("streamed pass of shard %s, line %d: %s; want progress in term %d", name, i, line, term)
		case last && (l.Report == nil || l.Report.Term != term || l.Report.Pass == 0):
			t.Errorf("streamed pass of shard %s, last line: %s; want its report in term %d", name, line, term)
		}
	}
}

// shMigrate checks that shard reg, in schema 1, has a migration of its
// own, which its own leader (reg) runs under its own term, while the
// default shard has none; g is any gateway.
func shMigrate(t *testing.T, g, reg *harness.Gateway, shards []*shard, terms map[string]int64) {
	t.Helper()
	admin := g.AdminEndpoint
	// Shard reg, in schema 1, has a migration of its own, which its own
	// leader runs under its own term; the default shard has none.
	var plan adminapi.MigrationPlan
	out := mustSweepgate(t, 0, admin, "migrate", "--json")
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Shard != "main" || plan.Stored != plan.Target || len(plan.Steps) != 0 {
		t.Errorf("migrate (the default shard's plan): %v; want nothing to migrate\n%s", err, out)
	}
	out = mustSweepgate(t, 0, admin, "migrate", "--shard", "reg", "--json")
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Shard != "reg" || plan.Stored != 1 || len(plan.Steps) == 0 {
		t.Errorf("migrate --shard reg: %v; want a plan from schema 1\n%s", err, out)
	}
	var mig adminapi.MigrationResult
	out = mustSweepgate(t, 0, reg.AdminEndpoint, "migrate", "--apply", "--shard", "reg", "--principal", "op", "--json")
	if err := json.Unmarshal([]byte(out), &mig); err != nil || mig.Shard != "reg" || mig.From != 1 || mig.To != plan.Target || mig.Term != terms["reg"] {
		t.Errorf("migrate --apply --shard reg on its leader: %v; want shard reg's migration from schema 1 in term %d\n%s", err, terms["reg"], out)
	}
	if n := shCount(t, shards[2], etcdPrefix+"schema"); n != 1 {
		t.Errorf("shard reg's schema records: %d", n)
	}
}

// shAdminCall sends one admin API request to g with its token.
func shAdminCall(t *testing.T, g *harness.Gateway, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, g.AdminEndpoint+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.AdminToken())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
