//go:build integration

package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestReclaimResumeCLI shows the breaker's pauses in `reclaim status` and
// lifts them with `reclaim resume`, one sweep or both; resuming a sweep
// that is not paused says so and succeeds.
func TestReclaimResumeCLI(t *testing.T) {
	t.Parallel()
	e := newReclaimEnv(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, p := range []etcdstore.Pause{
		{Sweep: "uploads", Reason: "plan deletes 9 of 10 stored uploads", Pass: 7, Term: 3, At: at},
		{Sweep: "digests", Reason: "plan marks (makes pending) 50 of 60 stored blobs", Pass: 7, Term: 3, At: at},
	} {
		if _, err := e.Store.Client().Do(t.Context(), e.Store.Keys().PauseOp(p)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, nil, append(args, "--admin", e.Base)...)
	}
	code, out, errOut := run("reclaim", "status")
	if code != ExitOK || errOut != "" || !strings.Contains(out, "PAUSED: the uploads sweep, since pass 7 (term 3,") ||
		!strings.Contains(out, "PAUSED: the digests sweep") || !strings.Contains(out, "sweepgate reclaim resume --uploads") {
		t.Errorf("status: exit %d, stderr %q:\n%s", code, errOut, out)
	}

	code, out, errOut = run("reclaim", "resume", "--uploads", "--principal", "carol")
	if code != ExitOK || errOut != "" || !strings.Contains(out, "the uploads sweep is resumed: the pause of pass 7 is lifted") ||
		!strings.Contains(out, "plan deletes 9 of 10 stored uploads") || strings.Contains(out, "digests") {
		t.Errorf("resume --uploads: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	if _, err := e.Store.GetPause(t.Context(), "digests"); err != nil {
		t.Errorf("the digests pause is gone after resume --uploads: %v", err)
	}

	code, out, _ = run("reclaim", "resume", "--json", "--principal", "carol")
	var res adminapi.Resumed
	if err := json.Unmarshal([]byte(out), &res); code != ExitOK || err != nil || len(res.Results) != 2 ||
		res.Results[0].Sweep != "uploads" || res.Results[0].Resumed || !res.Results[1].Resumed {
		t.Errorf("resume --json: exit %d, %v:\n%s", code, err, out)
	}
	code, out, _ = runCLI(t, []string{"USER=dave"}, "reclaim", "resume", "--digests", "--admin", e.Base)
	if code != ExitOK || !strings.Contains(out, "the digests sweep is not paused: nothing to resume, nothing changed") {
		t.Errorf("resume of a sweep not paused: exit %d:\n%s", code, out)
	}
	if code, _, errOut = run("reclaim", "resume", "uploads"); code != ExitUsage || !strings.Contains(errOut, `unexpected argument "uploads"`) {
		t.Errorf("resume with an argument: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut = run("reclaim", "resume"); code != ExitUsage || !strings.Contains(errOut, "--principal") {
		t.Errorf("resume without a principal or $USER: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ = runCLI(t, nil, "reclaim", "--help"); !strings.Contains(out, "sweepgate reclaim resume [--uploads] [--digests]") {
		t.Errorf("help lacks resume (exit %d):\n%s", code, out)
	}
}
