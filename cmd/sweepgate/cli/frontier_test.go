//go:build integration

package cli

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
)

func TestFrontierCLI(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	base := newDigestServer(t, st, "nightly-backup", "dr")
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, []string{AdminURLEnv + "=" + base}, args...)
	}

	code, out, errOut := run("frontier", "list")
	if code != ExitOK || errOut != "" {
		t.Fatalf("list: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"etcd's current revision: ",
		"2 configured plane(s) never reported: they count as revision 0 and hold every delete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if !hasRow(out, "PLANE", "REVISION", "LAG", "REPORTED", "BY", "CONFIGURED") {
		t.Errorf("list header:\n%s", out)
	}
	for _, plane := range []string{"nightly-backup", "dr"} {
		if r := rowOf(out, plane); len(r) != 7 || r[1] != "0" || r[2] != "(never)" || r[4] != "-" || r[5] != "-" || r[6] != "yes" {
			t.Errorf("row of %s: %q", plane, r)
		}
	}

	rev := currentRevision(t, st)
	code, out, errOut = run("frontier", "report", "--plane", "nightly-backup", "--revision", strconv.FormatInt(rev, 10), "--by", "backup-job")
	if code != ExitOK || errOut != "" || !strings.HasPrefix(out, "Recorded: plane nightly-backup has applied etcd revision "+strconv.FormatInt(rev, 10)+" (") ||
		!strings.Contains(out, "reported by backup-job at 2030-05-06T07:00:00Z") || strings.Contains(out, "Note:") {
		t.Fatalf("report: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	// A plane the gateway does not gate on may report; the CLI says so.
	code, out, _ = run("frontier", "report", "--plane=elsewhere", "--revision=1", "--json")
	var p adminapi.Plane
	if code != ExitOK || json.Unmarshal([]byte(out), &p) != nil || p.Plane != "elsewhere" || p.Configured || p.By != "127.0.0.1" {
		t.Fatalf("report --json: exit %d:\n%s", code, out)
	}
	code, out, _ = run("frontier", "report", "--plane=elsewhere", "--revision=1")
	if code != ExitOK || !strings.Contains(out, "Note: digests.planes does not list elsewhere on this gateway") {
		t.Errorf("unconfigured plane: exit %d:\n%s", code, out)
	}

	code, out, _ = run("frontier", "list")
	if code != ExitOK || !strings.Contains(out, "1 configured plane(s) never reported") {
		t.Errorf("list after reports: exit %d:\n%s", code, out)
	}
	if r := rowOf(out, "nightly-backup"); len(r) != 6 || r[1] != strconv.FormatInt(rev, 10) || r[3] != "2030-05-06T07:00:00Z" || r[4] != "backup-job" || r[5] != "yes" {
		t.Errorf("row of nightly-backup: %q", r)
	}
	if r := rowOf(out, "elsewhere"); len(r) != 6 || r[1] != "1" || r[4] != "127.0.0.1" || r[5] != "no" {
		t.Errorf("row of elsewhere: %q", r)
	}
	lines := strings.Split(out, "\n")
	var order []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "nightly-backup" || f[0] == "dr" || f[0] == "elsewhere") {
			order = append(order, f[0])
		}
	}
	if strings.Join(order, " ") != "nightly-backup dr elsewhere" {
		t.Errorf("row order %q", order)
	}
	code, out, _ = run("frontier", "list", "--json")
	var list adminapi.Frontiers
	if code != ExitOK || json.Unmarshal([]byte(out), &list) != nil || len(list.Planes) != 3 || !strings.Contains(out, "\n  \"planes\": [") {
		t.Errorf("list --json: exit %d:\n%s", code, out)
	}

	// The API refuses a revision etcd has not reached: a bad request.
	code, out, errOut = run("frontier", "report", "--plane", "dr", "--revision", "99999999999")
	if code != ExitUsage || out != "" || !strings.Contains(errOut, "ahead of etcd's current revision") {
		t.Errorf("revision ahead: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	checkFrontierCLIMistakes(t, run)
}

func checkFrontierCLIMistakes(t *testing.T, run func(args ...string) (int, string, string)) {
	t.Helper()
	// Command-line mistakes never reach the API.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"frontier"}, "missing subcommand"},
		{[]string{"frontier", "publish"}, `unknown subcommand "publish"`},
		{[]string{"frontier", "report", "--revision", "1"}, "--plane is required"},
		{[]string{"frontier", "report", "--plane", "dr"}, "--revision is required"},
		{[]string{"frontier", "report", "--plane", "dr", "--revision", "-1"}, "want a whole number, 0 or more"},
		{[]string{"frontier", "report", "--plane", "dr", "--revision", "12k"}, `--revision "12k"`},
		{[]string{"frontier", "report", "--plane", "dr/west", "--revision", "1"}, "'/'"},
		{[]string{"frontier", "report", "--plane", "dr", "--revision", "1", "extra"}, `unexpected argument "extra"`},
		{[]string{"frontier", "list", "--plane", "dr"}, "flag provided but not defined"},
		{[]string{"frontier", "list", "--admin", "ftp://x"}, "admin URL"},
	} {
		code, out, errOut := run(tt.args...)
		if code != ExitUsage || out != "" || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "--help") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 mentioning %q", tt.args, code, out, errOut, tt.want)
		}
	}

	// An admin API that is not there is an error, not a usage error.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	code, _, errOut := runCLI(t, nil, "frontier", "list", "--admin", dead)
	if code != ExitError || !strings.Contains(errOut, "cannot reach the admin API") {
		t.Errorf("unreachable: exit %d, stderr %q", code, errOut)
	}
}

func TestFrontierAndTrashHelp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"frontier", "--help"}, []string{"Usage: sweepgate frontier report --plane NAME --revision N", "frontier list", "Examples:", "Exit status"}},
		{[]string{"frontier", "help"}, []string{"Usage: sweepgate frontier report"}},
		{[]string{"frontier", "report", "-h"}, []string{"Usage: sweepgate frontier report"}},
		{[]string{"help", "frontier"}, []string{"Usage: sweepgate frontier report"}},
		{[]string{"trash", "--help"}, []string{"Usage: sweepgate trash list", "trash restore [--at DELETED_AT]", "Examples:", "Exit status"}},
		{[]string{"trash", "restore", "--help"}, []string{"Usage: sweepgate trash list"}},
		{[]string{"help", "trash"}, []string{"Usage: sweepgate trash list"}},
	} {
		code, out, errOut := runCLI(t, nil, tt.args...)
		if code != ExitOK || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", tt.args, code, errOut)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: output does not contain %q", tt.args, w)
			}
		}
		for i, line := range strings.Split(out, "\n") {
			if len(line) > 100 {
				t.Errorf("%q: help line %d is %d characters long", tt.args, i+1, len(line))
			}
		}
	}
}

// rowOf returns the fields of the table row whose first field is first.
func rowOf(out, first string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}
