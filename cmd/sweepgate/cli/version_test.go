package cli

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/logbuf"
)

// vcsRevision is the commit Go's build recorded in the running binary, ""
// when it recorded none (go test records none).
func vcsRevision() string {
	info, _ := debug.ReadBuildInfo()
	if info != nil {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

func TestVersionJSON(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, nil, "version", "--json")
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var keys map[string]any
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"version", "commit", "modified", "go", "module", "schema", "schema_min"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	var v versionJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.Schema != etcdstore.SchemaVersion || v.SchemaMin != etcdstore.MinSchemaVersion {
		t.Errorf("schema %d, schema_min %d; want %d and %d", v.Schema, v.SchemaMin, etcdstore.SchemaVersion, etcdstore.MinSchemaVersion)
	}
	if v.Version != "v0.0.0-test" || v.Go == "" || v.Module != "github.com/sweepgate/sweepgate" {
		t.Errorf("version %q, go %q, module %q", v.Version, v.Go, v.Module)
	}
}

func TestVersionText(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, nil, "version")
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	schema := fmt.Sprintf("  schema:   writes %d, reads %d", etcdstore.SchemaVersion, etcdstore.MinSchemaVersion)
	for _, w := range []string{"sweepgate v0.0.0-test\n", "\n  commit:   ", schema, "\n  go:       go", "\n  module:   github.com/sweepgate/sweepgate\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("version output does not contain %q:\n%s", w, out)
		}
	}
}

// TestVersionStamps checks where the version and the commit come from: the
// VERSION file unless -ldflags set a version, and Go's VCS stamp unless the
// build recorded none, when -ldflags' revision stands in.
func TestVersionStamps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		version, revision string
		wantVersion       string
	}{
		{"", "", sweepgate.Version()},
		{"", "0123abcd", sweepgate.Version()},
		{"9.9.9-rc.1", "", "9.9.9-rc.1"},
	}
	for _, tt := range tests {
		var out, errOut logbuf.Buffer
		c := &Client{Stdout: &out, Stderr: &errOut, Version: tt.version, Revision: tt.revision}
		if code := runClient(t, c, []string{"version", "--json"}); code != ExitOK {
			t.Fatalf("%+v: exit %d, stderr %q", tt, code, errOut.String())
		}
		var v versionJSON
		if err := json.Unmarshal([]byte(out.String()), &v); err != nil {
			t.Fatalf("%+v: %v\n%s", tt, err, out.String())
		}
		wantCommit := vcsRevision()
		if wantCommit == "" {
			wantCommit = tt.revision
		}
		if v.Version != tt.wantVersion || v.Commit != wantCommit {
			t.Errorf("-X version %q, revision %q: got version %q, commit %q; want %q, %q",
				tt.version, tt.revision, v.Version, v.Commit, tt.wantVersion, wantCommit)
		}
	}
}

func TestVersionHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version", "--help"}, {"version", "-h"}, {"help", "version"}} {
		code, out, errOut := runCLI(t, nil, args...)
		if code != ExitOK || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		for _, w := range []string{"Usage: sweepgate version [--json]", "--json", "schema_min", "commit"} {
			if !strings.Contains(out, w) {
				t.Errorf("%q: help does not mention %q:\n%s", args, w, out)
			}
		}
	}
}

func TestVersionUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"version", "--short"}, "flag provided but not defined: -short"},
		{[]string{"version", "--json", "--yaml"}, "flag provided but not defined: -yaml"},
		{[]string{"version", "--json=maybe"}, "invalid boolean value"},
		{[]string{"version", "extra"}, `unexpected argument "extra"`},
		{[]string{"version", "--json", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, nil, tt.args...)
		if code != ExitUsage || out != "" {
			t.Errorf("%q: exit %d, stdout %q; want exit %d and nothing on stdout", tt.args, code, out, ExitUsage)
		}
		if !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "sweepgate version --help") {
			t.Errorf("%q: stderr %q does not contain %q and a pointer to --help", tt.args, errOut, tt.want)
		}
	}
}
