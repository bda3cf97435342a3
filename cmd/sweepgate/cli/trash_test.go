//go:build integration

package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/admin/admintest"
	"github.com/sweepgate/sweepgate/etcdstore"
)

func TestTrashCLI(t *testing.T) {
	t.Parallel()
	st := admintest.NewStore(t)
	admintest.SeedTrash(t, st)
	base := newDigestServer(t, st)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, []string{AdminURLEnv + "=" + base}, args...)
	}
	old, newer := deletedAt(admintest.TrashOld), deletedAt(admintest.TrashNew)
	if !strings.Contains(old, ".123456789Z") {
		t.Fatalf("deleted-at times lose their nanoseconds: %s", old)
	}

	code, out, errOut := run("trash", "list")
	if code != ExitOK || errOut != "" {
		t.Fatalf("list: exit %d, stderr %q", code, errOut)
	}
	if !hasRow(out, "BUCKET", "KEY", "DELETED", "AT", "EXPIRES", "DIGESTS", "DELETED", "BY") {
		t.Errorf("list header:\n%s", out)
	}
	for _, want := range [][]string{
		{"lfs", "p/x", deletedAt(admintest.TrashLFS), when(admintest.TrashLFS.Add(7 * 24 * time.Hour)), "1", "-"},
		{"reg", "manifests/app", old, when(admintest.TrashOld.Add(7 * 24 * time.Hour)), "(expired)", "2", "alice"},
		{"reg", "manifests/app", newer, when(admintest.TrashNew.Add(7 * 24 * time.Hour)), "2", "bob"},
	} {
		if !hasRow(out, want...) {
			t.Errorf("list lacks the row %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "Restore one: sweepgate trash restore --at "+newer+" reg manifests/app\n") {
		t.Errorf("list does not show how to restore:\n%s", out)
	}

	code, out, errOut = run("trash", "list", "--bucket", "reg", "--limit", "1")
	if code != ExitOK || strings.Count(out, "manifests/app") != 2 || !strings.Contains(errOut, "More trash records match than the 1 shown") {
		t.Errorf("truncated list: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	code, out, _ = run("trash", "list", "--bucket", "lfs", "--key", "p/x", "--json")
	var list adminapi.TrashList
	if code != ExitOK || json.Unmarshal([]byte(out), &list) != nil || len(list.Trash) != 1 || list.Trash[0].Key != "p/x" {
		t.Errorf("list --json: exit %d:\n%s", code, out)
	}
	code, out, _ = run("trash", "list", "--bucket", "nothing-here")
	if code != ExitOK || out != "No trash record matches.\n" {
		t.Errorf("empty: exit %d, %q", code, out)
	}

	// Without --at the newest record of the object comes back.
	code, out, errOut = run("trash", "restore", "reg", "manifests/app")
	if code != ExitOK || errOut != "" || !strings.HasPrefix(out, "Restored reg/manifests/app (deleted at "+newer+"): its 2 digest(s) are referenced again.\n") ||
		!strings.Contains(out, "  "+admintest.DigestC+"\n") || strings.Contains(out, "expired") {
		t.Fatalf("restore newest: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	v, err := st.GetRefSource(t.Context(), "reg", "manifests/app")
	if err != nil || !reflect.DeepEqual(v.Value.Digests, []string{admintest.DigestB, admintest.DigestC}) || !v.Value.Restored {
		t.Fatalf("the references are not back: %+v, %v", v.Value, err)
	}
	// The older, expired one by name, flags after the arguments.
	code, out, _ = run("trash", "restore", "reg", "manifests/app", "--at", old, "--json")
	var ans adminapi.Restored
	if code != ExitOK || json.Unmarshal([]byte(out), &ans) != nil || !ans.Restored.Expired || !ans.Restored.DeletedAt.Equal(admintest.TrashOld) {
		t.Errorf("restore --at --json: exit %d:\n%s", code, out)
	}

	checkTrashCLIRefusals(t, st, old, run)
}

func checkTrashCLIRefusals(t *testing.T, st *etcdstore.Store, old string, run func(args ...string) (int, string, string)) {
	t.Helper()
	// Gone now: no such record.
	code, out, errOut := run("trash", "restore", "reg", "manifests/app")
	if code != ExitNotFound || out != "" || !strings.Contains(errOut, `no trash record of "manifests/app" in bucket "reg"`) {
		t.Errorf("nothing left: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = run("trash", "restore", "--at", old, "reg", "manifests/app")
	if code != ExitNotFound || !strings.Contains(errOut, "no trash record of reg/manifests/app deleted at "+old) {
		t.Errorf("restored twice: exit %d, stderr %q", code, errOut)
	}

	// A digest being reclaimed: refused, an error.
	if _, err := st.Client().Put(t.Context(), st.Keys().Guard(admintest.DigestC), `{"v":1}`); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run("trash", "restore", "lfs", "p/x")
	if code != ExitError || out != "" || !strings.Contains(errOut, "being deleted now; nothing was restored") {
		t.Errorf("guarded: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"trash"}, "missing subcommand"},
		{[]string{"trash", "empty"}, `unknown subcommand "empty"`},
		{[]string{"trash", "list", "--key", "k"}, "--key needs --bucket"},
		{[]string{"trash", "list", "--limit", "0"}, "--limit 0"},
		{[]string{"trash", "list", "extra"}, `unexpected argument "extra"`},
		{[]string{"trash", "restore", "reg"}, "want BUCKET and KEY"},
		{[]string{"trash", "restore", "reg", "k", "--at", "yesterday"}, `--at "yesterday"`},
		{[]string{"trash", "restore", "--confirm", "reg", "k"}, "flag provided but not defined"},
	} {
		code, out, errOut := run(tt.args...)
		if code != ExitUsage || out != "" || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "--help") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 mentioning %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

func TestTrashCLIEmpty(t *testing.T) {
	t.Parallel()
	base := newDigestServer(t, admintest.NewStore(t))
	code, out, errOut := runCLI(t, nil, "trash", "list", "--admin", base)
	if code != ExitOK || errOut != "" || out != "The trash is empty.\n" {
		t.Errorf("exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	// Sessions off: the gateway has no trash to show.
	base = newDigestServer(t, nil)
	code, _, errOut = runCLI(t, nil, "trash", "list", "--admin", base)
	if code != ExitError || !strings.Contains(errOut, "sessions.enabled is false") {
		t.Errorf("no store: exit %d, stderr %q", code, errOut)
	}
}
