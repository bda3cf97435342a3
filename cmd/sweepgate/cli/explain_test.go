//go:build integration

package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
)

// TestExplainCLI runs `sweepgate explain` against the API.
func TestExplainCLI(t *testing.T) {
	t.Parallel()
	e := newExplainEnv(t)
	w := e.World()
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, []string{AdminURLEnv + "=" + e.Base}, append([]string{"explain"}, args...)...)
	}

	code, out, errOut := run(admintest.ExplainBucket, w.Idle)
	if code != ExitOK || errOut != "" {
		t.Fatalf("upload: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"Upload " + w.Idle + " in bucket uploads, key idle/object\n",
		"Verdict: KEEP: marked expired 0s ago; deletable after 12h0m0s\n",
		"grace 24h0m0s, delete after 12h0m0s, stuck limit 1h0m0s, clock skew 5m0s.\n",
		"Checklist (a pass tries these rules in order and stops at the first that matches):\n",
		"delete_after=12h0m0s", "unchanged_since_mark=true", "expired_at=" + when(e.Clock.Now()),
		"Backend: 2 part(s), 2.0 KiB (2048 bytes)\n",
		"History: 2 transition(s)\n",
		"Last pass: 1 (term ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("upload output lacks %q:\n%s", want, out)
		}
	}
	if !hasRow(out, "no", "not_on_backend", "the", "backend", "holds", "the", "upload:", "2", "part(s),", "2048", "bytes") ||
		!hasRow(out, "MATCH", "expired", "marked", "expired", "0s", "ago;") || !hasRow(out, "no", "within_grace") {
		t.Errorf("upload output lacks its steps:\n%s", out)
	}
	if !hasRow(out, when(e.Clock.Now()), "active", "expired", "reclaimer") {
		t.Errorf("upload output lacks the reclaimer's transition:\n%s", out)
	}

	code, out, _ = run(admintest.ExplainBucket, w.Orphan, "--json")
	var ex adminapi.UploadExplanation
	if code != ExitOK || json.Unmarshal([]byte(out), &ex) != nil || ex.Verdict != "hold" || ex.Steps[len(ex.Steps)-1].Rule != "no_session" {
		t.Errorf("orphan --json: exit %d:\n%s", code, out)
	}
	code, out, _ = run("--key", "orphan/object", admintest.ExplainBucket, w.Orphan)
	if code != ExitOK || !strings.Contains(out, "Verdict: HOLD: no session") || !strings.Contains(out, "Session: none (an orphan") ||
		!strings.Contains(out, "reclaim orphans adopt") {
		t.Errorf("orphan: exit %d:\n%s", code, out)
	}

	code, out, _ = run(w.Refd)
	for _, want := range []string{
		"Digest " + w.Refd + "\n",
		"Verdict: KEEP: retained by references: named by 1 recorded reference(s): cas/manifests/app/v1 (manifests)\n",
		"references=1",
		"References: 1 shown\n", "Tombstone: none\n", "Guard: not armed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("referenced blob output lacks %q:\n%s", want, out)
		}
	}
	if code != ExitOK || !hasRow(out, "cas", "manifests/app/v1", "manifests") || !hasRow(out, "MATCH", "references", "named") ||
		!hasRow(out, "MATCH", "retained", "retained:") {
		t.Errorf("referenced blob: exit %d:\n%s", code, out)
	}

	code, out, _ = run(w.Unrefd)
	for _, want := range []string{
		"Verdict: PENDING: pending until every plane has applied revision " + fmt.Sprint(w.TombstoneRequire) + "; not there yet: backup (at 0)\n",
		"Tombstone: pending since ", "attempts 1, frontier " + fmt.Sprint(w.TombstoneRequire),
		"Planes, against the required frontier " + fmt.Sprint(w.TombstoneRequire) + ":\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pending blob output lacks %q:\n%s", want, out)
		}
	}
	if code != ExitOK || !hasRow(out, "backup", "0", "no") || !hasRow(out, "no", "references") || !hasRow(out, "MATCH", "frontier_wait", "pending") {
		t.Errorf("pending blob: exit %d:\n%s", code, out)
	}
	code, out, _ = run(w.Unrefd, "--json")
	var dx adminapi.DigestExplanation
	if code != ExitOK || json.Unmarshal([]byte(out), &dx) != nil || dx.Verdict != "pending" {
		t.Errorf("pending blob --json: exit %d:\n%s", code, out)
	}

	checkExplainCLIFailures(t, w, run)
}

func checkExplainCLIFailures(t *testing.T, w admintest.ExplainWorld, run func(args ...string) (int, string, string)) {
	t.Helper()
	// Nothing known: exit 3.
	code, out, errOut := run(admintest.ExplainBucket, "no-such-upload")
	if code != ExitNotFound || out != "" || !strings.Contains(errOut, "nothing is known about upload") {
		t.Errorf("unknown upload: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = run("sha256:" + strings.Repeat("0", 64))
	if code != ExitNotFound || !strings.Contains(errOut, "nothing is known about digest") {
		t.Errorf("unknown digest: exit %d, stderr %q", code, errOut)
	}

	// Bad command lines: exit 2, nothing asked.
	for _, args := range [][]string{{}, {"a", "b", "c"}, {"not-a-digest"}, {"--key", "k", w.Refd}, {"--bogus", admintest.ExplainBucket, w.Idle}} {
		if code, out, errOut := run(args...); code != ExitUsage || out != "" || !strings.Contains(errOut, "sweepgate explain --help") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	code, out, _ = run("--help")
	if code != ExitOK || !strings.Contains(out, "Usage: sweepgate explain [flags] BUCKET UPLOADID") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
	// No API there: exit 1.
	code, _, errOut = runCLI(t, nil, "explain", "--admin", "127.0.0.1:1", admintest.ExplainBucket, w.Idle)
	if code != ExitError || !strings.Contains(errOut, "cannot reach the admin API") {
		t.Errorf("no API: exit %d, stderr %q", code, errOut)
	}
}
