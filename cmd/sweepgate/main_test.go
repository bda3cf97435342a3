package main

import (
	"os"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate"
	"github.com/sweepgate/sweepgate/logbuf"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/config"
)

// runCLI runs one command in-process and returns its exit code and output.
func runCLI(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut logbuf.Buffer
	c := &app{stdout: &out, stderr: &errOut, environ: environ, version: "v0.0.0-test"}
	code = c.run(t.Context(), args)
	return code, out.String(), errOut.String()
}

func TestTopLevelUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, errOut := runCLI(t, nil, args...)
		if code != cli.ExitOK || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		for _, w := range []string{"Usage:", "serve", "sessions", "\n  reclaim ", "\n  frontier ", "\n  trash ", "version", "help"} {
			if !strings.Contains(out, w) {
				t.Errorf("%q: usage does not mention %q:\n%s", args, w, out)
			}
		}
	}
	// No command at all is a usage error, shown on stderr.
	code, out, errOut := runCLI(t, nil)
	if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "Commands:") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestCommandHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--help"}, []string{"Usage: sweepgate serve"}},
		{[]string{"serve", "-h"}, []string{"Usage: sweepgate serve"}},
		{[]string{"help", "serve"}, []string{"Usage: sweepgate serve"}},
		{[]string{"version", "--help"}, []string{"Usage: sweepgate version"}},
		{[]string{"help", "version"}, []string{"Usage: sweepgate version"}},
		{[]string{"help", "--help"}, []string{"Usage: sweepgate help"}},
		{[]string{"help", "help"}, []string{"Usage: sweepgate help"}},
		{[]string{"sessions", "--help"}, []string{"Usage: sweepgate sessions list", "Examples:"}},
		{[]string{"help", "sessions"}, []string{"Usage: sweepgate sessions list"}},
		{[]string{"reclaim", "--help"}, []string{"Usage: sweepgate reclaim run", "orphans delete", "Examples:", "Exit status"}},
		{[]string{"reclaim", "help"}, []string{"Usage: sweepgate reclaim run"}},
		{[]string{"reclaim", "status", "--help"}, []string{"Usage: sweepgate reclaim run"}},
		{[]string{"reclaim", "orphans", "delete", "-h"}, []string{"Usage: sweepgate reclaim run"}},
		{[]string{"help", "reclaim"}, []string{"Usage: sweepgate reclaim run"}},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, nil, tt.args...)
		if code != cli.ExitOK || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", tt.args, code, errOut)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: output does not contain %q", tt.args, w)
			}
		}
	}
	// serve's help lists every setting with its environment variable.
	_, out, _ := runCLI(t, nil, "serve", "--help")
	for _, s := range config.Settings() {
		for _, w := range []string{"--" + s.Flag, s.Env, s.Key} {
			if !strings.Contains(out, w) {
				t.Errorf("serve --help does not mention %q", w)
			}
		}
	}
	if !strings.Contains(out, "--config FILE") || !strings.Contains(out, "SWEEPGATE_CONFIG") {
		t.Error("serve --help does not mention --config / SWEEPGATE_CONFIG")
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, `unknown command "--nope"`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"serve", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"serve", "--max-clock-skew=soon"}, "max-clock-skew"},
		{[]string{"serve", "stray"}, `unexpected argument "stray"`},
		{[]string{"version", "--short"}, "flag provided but not defined"},
		{[]string{"version", "extra"}, `unexpected argument "extra"`},
		{[]string{"help", "nope"}, `unknown command "nope"`},
		{[]string{"help", "a", "b"}, "at most one command"},
		{[]string{"sessions"}, "missing subcommand"},
		{[]string{"sessions", "delete"}, `unknown subcommand "delete"`},
		{[]string{"sessions", "show", "bucket"}, "want BUCKET and UPLOADID"},
		{[]string{"reclaim"}, "missing subcommand"},
		{[]string{"reclaim", "sweep"}, `unknown subcommand "sweep"`},
		{[]string{"reclaim", "run", "extra"}, `unexpected argument "extra"`},
		{[]string{"reclaim", "run", "--confirm"}, "flag provided but not defined"},
		{[]string{"reclaim", "status", "--admin", "ftp://x"}, "admin URL"},
		{[]string{"reclaim", "reports", "--limit", "0"}, "--limit 0"},
		{[]string{"reclaim", "orphans", "purge"}, `unknown subcommand "purge"`},
		{[]string{"reclaim", "orphans", "--limit", "0"}, "--limit 0"},
		{[]string{"reclaim", "orphans", "adopt", "b/k?uploadId=1"}, "--principal is required"},
		{[]string{"reclaim", "orphans", "adopt", "--principal", "p"}, "want one REF"},
		{[]string{"reclaim", "orphans", "adopt", "--principal", "p", "b/k"}, "want BUCKET/KEY?uploadId=ID"},
		{[]string{"reclaim", "orphans", "delete"}, "name the uploads to delete"},
		{[]string{"reclaim", "orphans", "delete", "--confirm", "bucket-only?uploadId=1"}, "want BUCKET/KEY?uploadId=ID"},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, nil, tt.args...)
		if code != cli.ExitUsage {
			t.Errorf("%q: exit %d, want %d", tt.args, code, cli.ExitUsage)
		}
		if out != "" {
			t.Errorf("%q: wrote to stdout: %q", tt.args, out)
		}
		if !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "--help") {
			t.Errorf("%q: stderr %q does not contain %q and a pointer to --help", tt.args, errOut, tt.want)
		}
	}
}

func TestServeRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, nil, "serve")
	if code != cli.ExitError || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	for _, w := range []string{"invalid configuration", "backend.endpoint", "--backend-endpoint", "SWEEPGATE_BACKEND_ENDPOINT", "required"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr does not mention %q:\n%s", w, errOut)
		}
	}
	// A bad environment variable is a configuration error too, and a
	// secret in it is never echoed.
	code, _, errOut = runCLI(t, []string{"SWEEPGATE_CREDENTIALS=AK:hunter2-secret,broken"}, "serve")
	if code != cli.ExitError || !strings.Contains(errOut, "SWEEPGATE_CREDENTIALS") || strings.Contains(errOut, "hunter2") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, nil, "version")
	if code != cli.ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.HasPrefix(out, "sweepgate v0.0.0-test\n") || !strings.Contains(out, "module:") {
		t.Errorf("version output:\n%s", out)
	}
	// Without -ldflags the version is the VERSION file's.
	if b := cli.ReadBuildInfo("", ""); b.Version != sweepgate.Version() || b.GoVersion == "" {
		t.Errorf("build info without -ldflags: %+v, want version %q", b, sweepgate.Version())
	}
}

// TestREADMEListsEveryCommand: the README's table of commands names
// exactly the commands `sweepgate --help` prints, in its order.
func TestREADMEListsEveryCommand(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, line := range strings.Split(string(readme), "\n") {
		if name, ok := strings.CutPrefix(line, "| `sweepgate "); ok {
			name, _, _ = strings.Cut(name, "`")
			documented = append(documented, name)
		}
	}
	_, out, _ := runCLI(t, nil, "--help")
	_, list, _ := strings.Cut(out, "Commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	var printed []string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			printed = append(printed, f[0])
		}
	}
	if len(printed) < 5 || strings.Join(documented, " ") != strings.Join(printed, " ") {
		t.Errorf("README.md's commands table names %q; sweepgate --help prints %q", documented, printed)
	}
}
