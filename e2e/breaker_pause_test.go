//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/reclaim"
)

// TestBreakerPauseHolds runs the real gateway: a pass whose plan deletes
// more uploads than reclaim.max_delete_uploads is refused and pauses the
// upload sweep, although the uploads have no parts; after a restart with a
// ceiling the plan is within, the new term's pass is still refused (the
// pause is in etcd); `sweepgate reclaim resume --uploads` lifts it, writes
// an audit line, and the next pass deletes.
func TestBreakerPauseHolds(t *testing.T) {
	t.Parallel()
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"reclaim": map[string]any{"grace": reclaimGrace.String(), "delete_after": "1s", "interval": "1h",
			"max_delete_uploads": 1, "max_delete_uploads_fraction": 1, "max_mark_fraction": 1},
	}})
	e.RequireGateway(t)
	admin := e.Gateway.AdminEndpoint
	first := awaitLeading(t, e.Gateway)
	sdk := e.SDK(t)
	store := newSessionStore(t, e)
	bucket := e.Bucket(t)
	ids := []string{createUpload(t, sdk, bucket, "empty/1"), createUpload(t, sdk, bucket, "empty/2")}

	time.Sleep(reclaimGrace + 500*time.Millisecond) // idle past the configured grace
	if rep := runPass(t, admin); rep.Acted.Marked.Sessions != 2 {
		t.Fatalf("pass %d marked %+v, want both empty uploads", rep.Pass, rep.Acted.Marked)
	}
	time.Sleep(1500 * time.Millisecond) // past delete_after
	refused := refusedPass(t, admin)
	if !strings.Contains(refused.Refused, "deletes 2 of 2 stored uploads") || refused.Paused {
		t.Fatalf("pass %d refused %q paused %v, want the uploads ceiling", refused.Pass, refused.Refused, refused.Paused)
	}

	// A restart with a ceiling the plan is within: a new term, still paused.
	e.Gateway.RestartWithEnv("SWEEPGATE_RECLAIM_MAX_DELETE_UPLOADS=10")
	if st := awaitLeading(t, e.Gateway); st.Reclaimer.Term <= first.Reclaimer.Term {
		t.Fatalf("term after the restart %d, want above %d", st.Reclaimer.Term, first.Reclaimer.Term)
	}
	paused := refusedPass(t, admin)
	if !paused.Paused || paused.Breaker.MaxDeleteUploads != 10 || !strings.Contains(paused.Refused, "paused since pass 2") || paused.Acted != (reclaim.Acted{}) {
		t.Fatalf("pass %d after the restart: paused %v refused %q breaker %+v acted %+v", paused.Pass, paused.Paused, paused.Refused, paused.Breaker, paused.Acted)
	}
	out := mustSweepgate(t, 4, admin, "reclaim", "status")
	if !strings.Contains(out, "PAUSED: the uploads sweep, since pass 2") {
		t.Errorf("status does not show the pause:\n%s", out)
	}

	out = mustSweepgate(t, 0, admin, "reclaim", "resume", "--uploads", "--principal", "ops-oncall")
	if !strings.Contains(out, "the uploads sweep is resumed: the pause of pass 2 is lifted") {
		t.Errorf("resume:\n%s", out)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		for _, line := range strings.Split(e.Gateway.Log(), "\n") {
			var a struct {
				Msg, Action, What, Principal string
				PausedPass                   int64 `json:"paused_pass"`
			}
			if json.Unmarshal([]byte(line), &a) == nil && a.Msg == "audit" && a.Action == "resume_sweep" &&
				a.What == "uploads" && a.Principal == "ops-oncall" && a.PausedPass == 2 {
				return true, ""
			}
		}
		return false, "no resume_sweep audit line naming ops-oncall and pass 2 in the gateway's log"
	})
	rep := runPass(t, admin)
	if rep.Refused != "" || rep.Acted.Deleted.Sessions != 2 {
		t.Fatalf("pass %d after the resume: refused %q deleted %+v, want both deleted", rep.Pass, rep.Refused, rep.Acted.Deleted)
	}
	for _, id := range ids {
		store.requireState(t, bucket, id, "aborted")
	}
}

// refusedPass runs a pass that the breaker refuses (exit 4) and returns
// its report.
func refusedPass(t *testing.T, admin string) reclaim.Report {
	t.Helper()
	out := mustSweepgate(t, 4, admin, "reclaim", "run", "--json")
	var rep reclaim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reclaim run --json: %v\n%s", err, out)
	}
	return rep
}
