// Command sweepgate is the sweepgate binary: an S3-compatible gateway that
// keeps multipart upload sessions in etcd so that abandoned uploads can be
// reclaimed without deleting live work.
//
// Usage:
//
//	sweepgate serve [flags]   run the gateway
//	sweepgate sessions list   list upload sessions (through the admin API)
//	sweepgate sessions show   show one upload session and its history
//	sweepgate reclaim ...     run, plan and inspect the reclaimer; handle orphans
//	sweepgate frontier ...    report or list replica and backup planes' frontiers
//	sweepgate trash ...       list or restore deleted reference objects' digests
//	sweepgate version         print the version
//	sweepgate help [command]  show help
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/sweepgate/sweepgate/config"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; when
// empty, the module version or VCS revision from the build info is used. It
// is the one package-level variable, because -X can only set those.
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal starts a graceful shutdown, restore the
		// default handling so that a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	c := &cli{
		stdout:  os.Stdout,
		stderr:  os.Stderr,
		environ: os.Environ(),
		version: version,
	}
	os.Exit(c.run(ctx, os.Args[1:]))
}

// Exit statuses. 2 is what the flag package and most Unix tools use for a
// command line they cannot parse; 3 lets scripts tell "no such session"
// from a failure; 4 says the reclaimer did not do its work (the breaker
// refused the pass, the pass stopped, a delete was not confirmed), which a
// script or an alert should look at; 5 says the admin API refused the
// request for want of the right token (admin.token), which retrying cannot
// fix.
const (
	exitOK           = 0
	exitError        = 1
	exitUsage        = 2
	exitNotFound     = 3
	exitRefused      = 4
	exitUnauthorized = 5
)

// cli holds what a command needs from its process, so that tests can run
// commands in-process with their own output, environment and signals.
type cli struct {
	stdout, stderr io.Writer
	environ        []string
	version        string
	// onServing, when set, is called once serve listens, with the bound
	// addresses; tests listen on port 0 and learn the ports from it.
	onServing func(serving)
	// isTerminal says whether w is a terminal, where long commands show
	// their progress; nil asks the operating system.
	isTerminal func(w io.Writer) bool
	// adminTokenFile and adminConfig are the admin commands' --token-file
	// and --config (adminFlag).
	adminTokenFile, adminConfig string
	// clientCfg is the configuration the admin commands read, loaded once
	// (clientConfig).
	clientMu     sync.Mutex
	clientCfg    *config.Config
	clientCfgErr error
}

type command struct {
	name, summary string
	run           func(c *cli, ctx context.Context, args []string) int
	help          func(c *cli, w io.Writer)
}

// commands lists the subcommands in the order usage shows them.
func commands() []command {
	return []command{
		{"serve", "run the S3 gateway", (*cli).serve, (*cli).serveHelp},
		{"sessions", "list upload sessions, or show one with its history", (*cli).sessionsCmd, (*cli).sessionsHelp},
		{"reclaim", "run or plan reclaimer passes; its status, reports and orphans", (*cli).reclaimCmd, (*cli).reclaimHelp},
		{"frontier", "report or list how far replica and backup planes have come", (*cli).frontierCmd, (*cli).frontierHelp},
		{"trash", "list deleted reference objects' digests, or restore them", (*cli).trashCmd, (*cli).trashHelp},
		{"explain", "why the reclaimer keeps, marks, holds or would delete an upload or a blob", (*cli).explainCmd, (*cli).explainHelp},
		{"reload", "make a running gateway read its credentials and TLS certificate again", (*cli).reloadCmd, (*cli).reloadHelp},
		{"healthcheck", "probe a running gateway's /healthz or /readyz (for HEALTHCHECK)", (*cli).healthcheckCmd, (*cli).healthcheckHelp},
		{"version", "print the version and build information", (*cli).versionCmd, (*cli).versionHelp},
		{"help", "show help for a command", (*cli).helpCmd, (*cli).helpHelp},
	}
}

func findCommand(name string) (command, bool) {
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd, true
		}
	}
	return command{}, false
}

func (c *cli) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		c.usage(c.stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		c.usage(c.stdout)
		return exitOK
	}
	cmd, ok := findCommand(args[0])
	if !ok {
		fmt.Fprintf(c.stderr, "sweepgate: unknown command %q\nRun 'sweepgate --help' for usage.\n", args[0])
		return exitUsage
	}
	return cmd.run(c, ctx, args[1:])
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, `sweepgate is an S3-compatible gateway that records multipart uploads and the
references to content-addressed blobs in etcd, so that abandoned uploads and
unreferenced blobs can be reclaimed without deleting live work.

Usage:
  sweepgate <command> [flags]

Commands:
`)
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprint(w, "\nRun 'sweepgate <command> --help' for a command's flags.\n")
}

// usageError reports a command line that cannot be parsed.
func (c *cli) usageError(cmd string, err error) int {
	fmt.Fprintf(c.stderr, "sweepgate %s: %v\nRun 'sweepgate %s --help' for usage.\n", cmd, err, cmd)
	return exitUsage
}

func (c *cli) helpCmd(_ context.Context, args []string) int {
	switch {
	case len(args) == 0:
		c.usage(c.stdout)
		return exitOK
	case len(args) > 1:
		return c.usageError("help", fmt.Errorf("want at most one command, got %q", args))
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		c.helpHelp(c.stdout)
		return exitOK
	}
	cmd, ok := findCommand(args[0])
	if !ok {
		return c.usageError("help", fmt.Errorf("unknown command %q", args[0]))
	}
	cmd.help(c, c.stdout)
	return exitOK
}

func (c *cli) helpHelp(w io.Writer) {
	fmt.Fprint(w, "Usage: sweepgate help [command]\n\nShows the commands, or the flags of one command.\n")
}

// subcommand is one subcommand of a command group such as `sweepgate
// reclaim`.
type subcommand struct {
	name string
	run  func(context.Context, []string) int
}

// runSubcommand runs the subcommand args[0] names with the rest of args,
// prints the group's help for -h/--help/help, and answers a usage error
// naming the subcommands otherwise.
func (c *cli) runSubcommand(ctx context.Context, group string, help func(io.Writer), args []string, subs ...subcommand) int {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(subs) == 1 {
		want = names[0]
	}
	if len(args) == 0 {
		return c.usageError(group, fmt.Errorf("missing subcommand: %s", want))
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		help(c.stdout)
		return exitOK
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, args[1:])
		}
	}
	return c.usageError(group, fmt.Errorf("unknown subcommand %q: want %s", args[0], want))
}
