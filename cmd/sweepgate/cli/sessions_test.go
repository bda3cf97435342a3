//go:build integration

package cli

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
)

func TestSessionsCLI(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	admintest.SeedSessions(t, st)
	base := newAdminServer(t, st)

	t.Run("list table", func(t *testing.T) {
		code, out, errOut := runCLI(t, nil, "sessions", "list", "--admin", base)
		if code != ExitOK || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(lines) != 5 {
			t.Fatalf("want a header and 4 rows:\n%s", out)
		}
		if f := strings.Fields(lines[0]); strings.Join(f, " ") != "BUCKET UPLOAD ID STATE OWNER LAST ACTIVITY KEY" {
			t.Errorf("header %q", lines[0])
		}
		wantRows := [][]string{
			{"backups", "up/done+1", "completed", "alice", "2030-05-06T07:01:00Z", "db.dump"},
			{"backups", "up-pending", "cleanup_pending", "carol", "-", "x"},
			{"photos", "up-active", "active", "alice", "2030-05-06T07:03:00Z", "2030/big.iso"},
			// A key with a tab is quoted so that it cannot break the table.
			{"photos", "up-expired", "expired", "bob", "2030-05-06T07:00:00Z", `"old\tkey"`},
		}
		for i, want := range wantRows {
			if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("row %d = %q, want %q", i, got, want)
			}
		}
		// Columns line up.
		col := strings.Index(lines[0], "STATE")
		for _, l := range lines[1:] {
			if l[col-1] != ' ' || l[col] == ' ' {
				t.Errorf("row %q is not aligned with the header", l)
			}
		}
	})

	t.Run("list filters, env URL, flags after arguments", func(t *testing.T) {
		env := []string{AdminURLEnv + "=" + strings.TrimPrefix(base, "http://")}
		code, out, errOut := runCLI(t, env, "sessions", "list", "--state", "expired,cleanup_pending", "--bucket=photos")
		if code != ExitOK || errOut != "" || !strings.Contains(out, "up-expired") || strings.Contains(out, "up-pending") || strings.Contains(out, "up-active") {
			t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
		}
		code, out, _ = runCLI(t, env, "sessions", "list", "--state", "aborted")
		if code != ExitOK || out != "No sessions match.\n" {
			t.Errorf("no match: exit %d, %q", code, out)
		}
	})

	t.Run("list truncated", func(t *testing.T) {
		code, out, errOut := runCLI(t, nil, "sessions", "list", "--admin", base, "--limit", "2")
		if code != ExitOK || strings.Count(out, "\n") != 3 || !strings.Contains(errOut, "--after backups/up-pending") {
			t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
		}
		code, out, _ = runCLI(t, nil, "sessions", "list", "--admin", base, "--limit", "2", "--after", "backups/up-pending")
		if code != ExitOK || !strings.Contains(out, "up-active") || !strings.Contains(out, "up-expired") || strings.Contains(out, "up-pending") {
			t.Errorf("second page: exit %d:\n%s", code, out)
		}
	})

	t.Run("list json", func(t *testing.T) {
		code, out, errOut := runCLI(t, nil, "sessions", "list", "--json", "--admin", base+"/", "--state", "active")
		if code != ExitOK || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		var l adminapi.SessionList
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("--json output is not JSON: %v\n%s", err, out)
		}
		if len(l.Sessions) != 1 || l.Sessions[0].UploadID != "up-active" || !strings.Contains(out, "\n  \"sessions\": [") {
			t.Errorf("--json: %s", out)
		}
	})

	testSessionsShowAndErrors(t, base)
}

func testSessionsShowAndErrors(t *testing.T, base string) {
	t.Helper()
	t.Run("show table", func(t *testing.T) {
		code, out, errOut := runCLI(t, nil, "sessions", "show", "backups", "up/done+1", "--admin", base)
		if code != ExitOK || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		for _, want := range []string{
			"Upload ID:      up/done+1",
			"State:          completed since 2030-05-06T07:03:00Z",
			"Completed:      ETag \"abc-2\", version v1, at 2030-05-06T07:03:00Z",
			"History: 3 transition(s)",
			"2030-05-06T07:02:00Z  active      completing  gateway  -     complete",
			"Parts: 2, 6.0 MiB (6291456 bytes)",
			"1     5242880  \"e1\"  sha     2030-05-06T07:01:00Z",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
		code, out, _ = runCLI(t, nil, "sessions", "show", "--admin", base, "photos", "up-active")
		if code != ExitOK || !strings.Contains(out, "Last activity:  2030-05-06T07:03:00Z (UploadPart, part 7)") || !strings.Contains(out, "Parts: 0, 0 bytes") {
			t.Errorf("show active: exit %d:\n%s", code, out)
		}
		code, out, _ = runCLI(t, nil, "sessions", "show", "--admin", base, "photos", "up-expired")
		if code != ExitOK || !strings.Contains(out, "reclaimer  42") || !strings.Contains(out, "Expired at:") {
			t.Errorf("show expired: exit %d:\n%s", code, out)
		}
	})

	t.Run("show json", func(t *testing.T) {
		code, out, _ := runCLI(t, nil, "sessions", "show", "--json", "--admin", base, "backups", "up-pending")
		var ans adminapi.SessionAnswer
		if code != ExitOK || json.Unmarshal([]byte(out), &ans) != nil || ans.Session.State != "cleanup_pending" || ans.Session.AbortAttempts != 2 {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})

	t.Run("exit codes", func(t *testing.T) {
		tests := []struct {
			args    []string
			code    int
			wantErr string
		}{
			{[]string{"show", "photos", "nope"}, ExitNotFound, `no session for upload "nope" in bucket "photos"`},
			{[]string{"show", "photos"}, ExitUsage, "want BUCKET and UPLOADID"},
			{[]string{"show", "a", "b", "c"}, ExitUsage, "want BUCKET and UPLOADID"},
			{[]string{"list", "extra"}, ExitUsage, `unexpected argument "extra"`},
			{[]string{"list", "--state", "lost"}, ExitUsage, `unknown state "lost"`},
			{[]string{"list", "--limit", "0"}, ExitUsage, "--limit"},
			{[]string{"list", "--nope"}, ExitUsage, "flag provided but not defined"},
			{[]string{"show", "--state", "active", "a", "b"}, ExitUsage, "flag provided but not defined"},
			{[]string{"list", "--after", "garbage"}, ExitUsage, "after"}, // refused by the server: 400
		}
		for _, tt := range tests {
			args := append([]string{"sessions"}, append(tt.args, "--admin", base)...)
			code, out, errOut := runCLI(t, nil, args...)
			if code != tt.code || out != "" || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("%q: exit %d (want %d), stdout %q, stderr %q (want %q)", tt.args, code, tt.code, out, errOut, tt.wantErr)
			}
		}
		for _, args := range [][]string{{"sessions"}, {"sessions", "frob"}, {"sessions", "list", "--admin", "ftp://x"}} {
			if code, _, errOut := runCLI(t, nil, args...); code != ExitUsage || !strings.Contains(errOut, "--help") {
				t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		// Nothing listening: exit 1 with a pointer to --admin.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + l.Addr().String()
		l.Close()
		code, _, errOut := runCLI(t, nil, "sessions", "list", "--admin", dead)
		if code != ExitError || !strings.Contains(errOut, "cannot reach the admin API at "+dead) || !strings.Contains(errOut, AdminURLEnv) {
			t.Errorf("unreachable: exit %d, stderr %q", code, errOut)
		}
		// Sessions off on the gateway: exit 1 with the server's reason.
		code, _, errOut = runCLI(t, nil, "sessions", "show", "--admin", newAdminServer(t, nil), "a", "b")
		if code != ExitError || !strings.Contains(errOut, "sessions.enabled") {
			t.Errorf("sessions off: exit %d, stderr %q", code, errOut)
		}
		// Something that is not the admin API: a plain 404 is not "no such
		// session".
		other := httptest.NewServer(http.NotFoundHandler())
		defer other.Close()
		code, _, errOut = runCLI(t, nil, "sessions", "show", "--admin", other.URL, "a", "b")
		if code != ExitError || !strings.Contains(errOut, "not the sweepgate admin API") {
			t.Errorf("not our API: exit %d, stderr %q", code, errOut)
		}
	})
}

func TestSessionsHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"sessions", "--help"}, {"sessions", "list", "--help"}, {"sessions", "show", "-h"}, {"help", "sessions"}} {
		code, out, errOut := runCLI(t, nil, args...)
		if code != ExitOK || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		for _, want := range []string{"Usage: sweepgate sessions list", "sweepgate sessions show [flags] BUCKET UPLOADID", "Examples:", "--state", AdminURLEnv, "cleanup_pending", "3 no such session"} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: help lacks %q", args, want)
			}
		}
	}
}

func TestShellWord(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"photos/up-1": "photos/up-1",
		"b/a%2Fb~c.d": "b/a%2Fb~c.d",
		"b/x&y":       "'b/x&y'",
		"b/it's":      `'b/it'\''s'`,
		"":            "''",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}
