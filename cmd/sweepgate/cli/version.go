package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/sweepgate/sweepgate"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// BuildInfo is what sweepgate knows about the build it runs.
type BuildInfo struct {
	Version   string // release version (ReadBuildInfo)
	Module    string
	GoVersion string
	Revision  string // the commit it was built from, when known
	Time      string // commit time, from Go's VCS stamp
	Modified  bool   // built from a checkout with uncommitted changes
}

// ReadBuildInfo reads the build's version and commit. The version is
// ldflagsVersion when a build set one with -ldflags -X main.version, and
// otherwise the VERSION file the tree was built from (sweepgate.Version),
// which needs neither tags nor ldflags. The commit is Go's VCS stamp
// (vcs.revision), which `go build` records in a checkout; a build without
// one, such as the image's, whose build context has no .git, takes
// ldflagsRevision (-X main.revision) instead.
func ReadBuildInfo(ldflagsVersion, ldflagsRevision string) BuildInfo {
	b := BuildInfo{Version: ldflagsVersion, Module: "github.com/sweepgate/sweepgate"}
	if b.Version == "" {
		b.Version = sweepgate.Version()
	}
	info, ok := debug.ReadBuildInfo()
	if ok {
		b.GoVersion = info.GoVersion
		if info.Main.Path != "" {
			b.Module = info.Main.Path
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Revision == "" {
		b.Revision = ldflagsRevision
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// versionJSON is `sweepgate version --json`. Its keys are an interface for
// scripts: add keys, never rename or remove one.
type versionJSON struct {
	Version string `json:"version"`
	// Commit is "" when the build recorded none.
	Commit     string `json:"commit"`
	Modified   bool   `json:"modified"`
	CommitTime string `json:"commit_time,omitempty"`
	Go         string `json:"go"`
	Module     string `json:"module"`
	// Schema is the keyspace schema this binary writes; SchemaMin the
	// oldest it reads (etcdstore.SchemaVersion, etcdstore.MinSchemaVersion).
	Schema    int `json:"schema"`
	SchemaMin int `json:"schema_min"`
}

func (b BuildInfo) json() versionJSON {
	return versionJSON{
		Version: b.Version, Commit: b.Revision, Modified: b.Modified, CommitTime: b.Time,
		Go: b.GoVersion, Module: b.Module,
		Schema: etcdstore.SchemaVersion, SchemaMin: etcdstore.MinSchemaVersion,
	}
}

// schemaText says which keyspace schemas the binary writes and reads.
func schemaText(written, oldest int) string {
	if oldest == written {
		return fmt.Sprintf("writes %d, reads %d", written, oldest)
	}
	return fmt.Sprintf("writes %d, reads %d to %d", written, oldest, written)
}

func (b BuildInfo) write(w io.Writer) {
	fmt.Fprintf(w, "sweepgate %s\n", b.Version)
	commit := b.Revision
	switch {
	case commit == "":
		commit = "unknown (the build recorded none)"
	case b.Modified:
		commit += " (modified)"
	}
	fmt.Fprintf(w, "  commit:   %s\n", commit)
	if b.Time != "" {
		fmt.Fprintf(w, "  time:     %s\n", b.Time)
	}
	fmt.Fprintf(w, "  schema:   %s\n", schemaText(etcdstore.SchemaVersion, etcdstore.MinSchemaVersion))
	if b.GoVersion != "" {
		fmt.Fprintf(w, "  go:       %s\n", b.GoVersion)
	}
	fmt.Fprintf(w, "  module:   %s\n", b.Module)
}

func (c *Client) versionCmd(_ context.Context, args []string) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.versionHelp(c.Stdout)
			return ExitOK
		}
		return c.usageError("version", err)
	}
	if fs.NArg() > 0 {
		return c.usageError("version", fmt.Errorf("unexpected argument %q", strings.Join(fs.Args(), " ")))
	}
	b := ReadBuildInfo(c.Version, c.Revision)
	if !*asJSON {
		b.write(c.Stdout)
		return ExitOK
	}
	out, err := json.MarshalIndent(b.json(), "", "  ")
	if err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate version: %v\n", err)
		return ExitError
	}
	fmt.Fprintf(c.Stdout, "%s\n", out)
	return ExitOK
}

func (c *Client) versionHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: sweepgate version [--json]

Prints sweepgate's version, the commit it was built from, the keyspace
schema it writes in etcd and the oldest it reads, the Go version it was
built with and its module.

The version is the VERSION file of the tree it was built from, unless the
build set another with -ldflags "-X main.version=...". The commit is the one
Go's build recorded from the checkout ("(modified)" when the checkout had
uncommitted changes), or the one a build without .git was given with
-ldflags "-X main.revision=..." (the container image's REVISION), and
"unknown" when neither.

Flags:
  --json   print one JSON object instead: version, commit, modified,
           commit_time (when known), go, module, schema (the keyspace
           schema written) and schema_min (the oldest read)

Examples:
  sweepgate version
  sweepgate version --json | jq -r .schema
`)
}
