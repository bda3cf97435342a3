//go:build integration

package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// reclaimStatusOf reads a serve's reclaimer status through the CLI.
func reclaimStatusOf(t *testing.T, s *runningServe) adminapi.ReclaimStatus {
	t.Helper()
	code, out, errOut := runCLI(t, s.cliEnv, "reclaim", "status", "--json", "--admin", s.addrs.Admin)
	if code != cli.ExitOK {
		t.Fatalf("reclaim status: exit %d, stderr %q", code, errOut)
	}
	var st adminapi.ReclaimStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("reclaim status: %v\n%s", err, out)
	}
	return st
}

func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeReclaimer checks serve's wiring of the reclaimer: it campaigns
// and leads, says so at start-up, in its status and metrics, runs a pass on
// demand, and resigns on shutdown so that another gateway sharing its etcd
// takes over at once rather than after the election TTL.
func TestServeReclaimer(t *testing.T) {
	t.Parallel()
	etcd, _ := etcdtest.Start(t)
	b := newBackend(t)
	// A long TTL: a handover faster than it proves the leader resigned.
	args := append(baseArgs(t, b), "--etcd-endpoints="+strings.Join(etcd.Endpoints(), ","), "--reclaim-election-ttl=60s")
	first := startServe(t, args...)
	waitUntil(t, "the first gateway to lead", 20*time.Second, func() bool { return reclaimStatusOf(t, first).Reclaimer.Leading })
	second := startServe(t, append(args, "--reclaim-dry-run")...)

	st1, st2 := reclaimStatusOf(t, first), reclaimStatusOf(t, second)
	if !strings.HasSuffix(st1.Reclaimer.ID, "@"+first.addrs.Admin) || st1.Reclaimer.Leader == nil || st1.Reclaimer.Leader.ID != st1.Reclaimer.ID {
		t.Errorf("first gateway's status: %+v", st1.Reclaimer)
	}
	if st2.Reclaimer.Leading || st2.Reclaimer.Leader == nil || st2.Reclaimer.Leader.ID != st1.Reclaimer.ID || !st2.Reclaimer.DryRun {
		t.Errorf("second gateway's status: %+v", st2.Reclaimer)
	}

	// A pass on demand, on the leader; the follower names the leader.
	if code, out, errOut := runCLI(t, first.cliEnv, "reclaim", "run", "--admin", first.addrs.Admin); code != cli.ExitOK || !strings.Contains(out, "Pass 1, term") {
		t.Errorf("run on the leader: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	if code, _, errOut := runCLI(t, second.cliEnv, "reclaim", "run", "--admin", second.addrs.Admin); code != cli.ExitError || !strings.Contains(errOut, "the leader is "+st1.Reclaimer.ID) {
		t.Errorf("run on the follower: exit %d, stderr %q", code, errOut)
	}
	_, metrics := get(t, http.DefaultClient, "http://"+first.addrs.Admin+"/metrics")
	for _, w := range []string{"sweepgate_reclaim_leading 1", `sweepgate_reclaim_passes_total{result="ok"} 1`} {
		if !strings.Contains(metrics, w) {
			t.Errorf("leader's /metrics lacks %s", w)
		}
	}

	// The leader stops and hands over at once.
	stoppedAt := time.Now()
	if code := first.stop(t); code != cli.ExitOK {
		t.Errorf("first gateway exited %d", code)
	}
	waitUntil(t, "the second gateway to lead", 20*time.Second, func() bool { return reclaimStatusOf(t, second).Reclaimer.Leading })
	if d := time.Since(stoppedAt); d > 30*time.Second {
		t.Errorf("handover took %s; the stopping leader should have resigned", d)
	}
	if st := reclaimStatusOf(t, second); st.Reclaimer.Term <= st1.Reclaimer.Term {
		t.Errorf("new term %d is not above the old one, %d", st.Reclaimer.Term, st1.Reclaimer.Term)
	}
	logs := first.logs.String()
	for _, w := range []string{`"reclaimer":"on"`, `"reclaimer_id":"` + st1.Reclaimer.ID + `"`, `"msg":"reclaimer leadership won"`, `"msg":"reclaimer stopped"`} {
		if !strings.Contains(logs, w) {
			t.Errorf("first gateway's logs lack %s", w)
		}
	}
	if !strings.Contains(second.logs.String(), `"reclaimer":"on, dry run`) {
		t.Error("second gateway's start-up line does not say it runs dry")
	}
	if strings.Contains(logs, `"level":"ERROR"`) {
		t.Errorf("a clean run logged errors:\n%s", logs)
	}
}

// TestServeReclaimerOff checks the two ways a gateway runs no reclaimer:
// reclaim.enabled off (it answers reads, never leads) and sessions off (no
// reclaimer at all).
func TestServeReclaimerOff(t *testing.T) {
	t.Parallel()
	b := newBackend(t)

	off := startServe(t, append(baseArgs(t, b), "--reclaim-enabled=false")...)
	st := reclaimStatusOf(t, off)
	if st.Reclaimer.Enabled || st.Reclaimer.Leading || st.Reclaimer.Leader != nil {
		t.Errorf("status with reclaim.enabled off: %+v", st.Reclaimer)
	}
	if code, _, errOut := runCLI(t, off.cliEnv, "reclaim", "run", "--admin", off.addrs.Admin); code != cli.ExitError || !strings.Contains(errOut, "reclaim.enabled is off here") {
		t.Errorf("run: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runCLI(t, off.cliEnv, "reclaim", "plan", "--admin", off.addrs.Admin); code != cli.ExitOK || !strings.Contains(out, "(a dry run: nothing was changed)") {
		t.Errorf("plan: exit %d:\n%s", code, out)
	}
	if !strings.Contains(off.logs.String(), `"reclaimer":"off: reclaim.enabled is false`) {
		t.Error("start-up line does not say the reclaimer is off")
	}

	noSessions := startServe(t, append(baseArgs(t, b), "--sessions-enabled=false")...)
	code, _, errOut := runCLI(t, noSessions.cliEnv, "reclaim", "status", "--admin", noSessions.addrs.Admin)
	if code != cli.ExitError || !strings.Contains(errOut, "no reclaimer: sessions.enabled is false") {
		t.Errorf("status without sessions: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(noSessions.logs.String(), `"reclaimer":"off: sessions.enabled is false`) {
		t.Error("start-up line does not say why there is no reclaimer")
	}
	for _, s := range []*runningServe{off, noSessions} {
		if code := s.stop(t); code != cli.ExitOK {
			t.Errorf("exit %d", code)
		}
	}
}
