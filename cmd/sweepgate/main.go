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
//	sweepgate version         print the version, commit and keyspace schema
//	sweepgate help [command]  show help
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
)

// version and revision may be set at build time with -ldflags
// "-X main.version=1.2.3 -X main.revision=COMMIT". version overrides the
// VERSION file the tree builds (sweepgate.Version); revision stands in for
// the commit only where Go's build recorded none (a build without .git, as
// in the image). They are the only package-level variables, because -X can
// only set those.
var version, revision string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal starts a graceful shutdown, restore the
		// default handling so that a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	c := &app{
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		environ:  os.Environ(),
		version:  version,
		revision: revision,
	}
	os.Exit(c.run(ctx, os.Args[1:]))
}

// app holds what a command needs from its process, so that tests can run
// commands in-process with their own output, environment and signals.
type app struct {
	stdout, stderr io.Writer
	environ        []string
	// version and revision are main's -ldflags -X stamps, if any.
	version, revision string
	// onServing, when set, is called once serve listens, with the bound
	// addresses; tests listen on port 0 and learn the ports from it.
	onServing func(serving)
}

type command struct {
	name, summary string
	run           func(c *app, ctx context.Context, args []string) int
	help          func(c *app, w io.Writer)
}

// commands lists the subcommands in the order usage shows them: serve,
// the client commands of package cli, and help.
func commands() []command {
	cmds := []command{{"serve", "run the S3 gateway", (*app).serve, (*app).serveHelp}}
	for _, cc := range cli.Commands() {
		cmds = append(cmds, command{
			cc.Name, cc.Summary,
			func(c *app, ctx context.Context, args []string) int { return cc.Run(c.client(), ctx, args) },
			func(c *app, w io.Writer) { cc.Help(c.client(), w) },
		})
	}
	return append(cmds, command{"help", "show help for a command", (*app).helpCmd, (*app).helpHelp})
}

// client returns the process as a client command sees it: a new Client
// for each command line, since its flags and the configuration it loads
// belong to that command line.
func (c *app) client() *cli.Client {
	return &cli.Client{Stdout: c.stdout, Stderr: c.stderr, Environ: c.environ, Version: c.version, Revision: c.revision}
}

func findCommand(name string) (command, bool) {
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd, true
		}
	}
	return command{}, false
}

func (c *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		c.usage(c.stderr)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		c.usage(c.stdout)
		return cli.ExitOK
	}
	cmd, ok := findCommand(args[0])
	if !ok {
		fmt.Fprintf(c.stderr, "sweepgate: unknown command %q\nRun 'sweepgate --help' for usage.\n", args[0])
		return cli.ExitUsage
	}
	return cmd.run(c, ctx, args[1:])
}

func (c *app) usage(w io.Writer) {
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

func (c *app) helpCmd(_ context.Context, args []string) int {
	switch {
	case len(args) == 0:
		c.usage(c.stdout)
		return cli.ExitOK
	case len(args) > 1:
		return cli.UsageError(c.stderr, "help", fmt.Errorf("want at most one command, got %q", args))
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		c.helpHelp(c.stdout)
		return cli.ExitOK
	}
	cmd, ok := findCommand(args[0])
	if !ok {
		return cli.UsageError(c.stderr, "help", fmt.Errorf("unknown command %q", args[0]))
	}
	cmd.help(c, c.stdout)
	return cli.ExitOK
}

func (c *app) helpHelp(w io.Writer) {
	fmt.Fprint(w, "Usage: sweepgate help [command]\n\nShows the commands, or the flags of one command.\n")
}
