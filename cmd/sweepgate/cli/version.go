package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// BuildInfo is what sweepgate knows about the build it runs.
type BuildInfo struct {
	Version   string // release version, or "devel"
	Module    string
	GoVersion string
	Revision  string // VCS commit, when built from a checkout
	Time      string // commit time
	Modified  bool   // built from a checkout with uncommitted changes
}

// ReadBuildInfo prefers the version given with -ldflags -X, then the module
// version that `go install module@version` records, and otherwise calls the
// build "devel" and relies on the VCS stamp to tell builds apart.
func ReadBuildInfo(ldflagsVersion string) BuildInfo {
	b := BuildInfo{Version: ldflagsVersion, Module: "github.com/sweepgate/sweepgate"}
	info, ok := debug.ReadBuildInfo()
	if ok {
		b.GoVersion = info.GoVersion
		if info.Main.Path != "" {
			b.Module = info.Main.Path
		}
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
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
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

func (b BuildInfo) write(w io.Writer) {
	fmt.Fprintf(w, "sweepgate %s\n", b.Version)
	fmt.Fprintf(w, "  module:   %s\n", b.Module)
	if b.GoVersion != "" {
		fmt.Fprintf(w, "  go:       %s\n", b.GoVersion)
	}
	if b.Revision != "" {
		rev := b.Revision
		if b.Modified {
			rev += " (modified)"
		}
		fmt.Fprintf(w, "  revision: %s\n", rev)
	}
	if b.Time != "" {
		fmt.Fprintf(w, "  time:     %s\n", b.Time)
	}
}

func (c *Client) versionCmd(_ context.Context, args []string) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
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
	ReadBuildInfo(c.Version).write(c.Stdout)
	return ExitOK
}

func (c *Client) versionHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: sweepgate version

Prints sweepgate's version, the Go version it was built with and, when it
was built from a checkout, the commit.
`)
}
