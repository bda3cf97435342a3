// Package cli is the sweepgate binary's client commands: the thin clients
// of a running gateway's admin API (sessions, reclaim, frontier, trash,
// explain, reload), the configuration check (config check), its health
// probe (healthcheck) and version. Package
// main dispatches to them through Commands and runs serve itself.
package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/sweepgate/sweepgate/config"
)

// Exit statuses. 2 is what the flag package and most Unix tools use for a
// command line they cannot parse; 3 lets scripts tell "no such session"
// from a failure; 4 says the reclaimer did not do its work (the breaker
// refused the pass, the pass stopped, a delete was not confirmed), which a
// script or an alert should look at; 5 says the admin API refused the
// request for want of the right token (admin.token), which retrying cannot
// fix.
const (
	ExitOK           = 0
	ExitError        = 1
	ExitUsage        = 2
	ExitNotFound     = 3
	ExitRefused      = 4
	ExitUnauthorized = 5
)

// Client holds what a client command needs from its process, so that
// tests can run commands in-process with their own output and
// environment. One Client serves one command line.
type Client struct {
	Stdout, Stderr io.Writer
	Environ        []string
	// Version and Revision are the version and commit given with -ldflags
	// -X, if any (ReadBuildInfo).
	Version, Revision string
	// IsTerminal says whether w is a terminal, where long commands show
	// their progress; nil asks the operating system.
	IsTerminal func(w io.Writer) bool
	// adminTokenFile, adminConfig and adminCA are the admin commands'
	// --token-file, --config and --admin-ca (adminFlag).
	adminTokenFile, adminConfig, adminCA string
	// adminShard is --shard (shardFlag): the etcd shard the request is
	// about, sent as the shard parameter; empty leaves it to the API.
	adminShard string
	// httpClient is the client of the admin API (adminHTTP), made once.
	httpMu     sync.Mutex
	httpClient *http.Client
	// clientCfg is the configuration the admin commands read, loaded once
	// (clientConfig).
	clientMu     sync.Mutex
	clientCfg    *config.Config
	clientCfgErr error
}

// Command is one client command of the binary.
type Command struct {
	Name, Summary string
	Run           func(c *Client, ctx context.Context, args []string) int
	Help          func(c *Client, w io.Writer)
}

// Commands lists the client commands in the order usage shows them.
func Commands() []Command {
	return []Command{
		{"sessions", "list upload sessions, or show one with its history", (*Client).sessionsCmd, (*Client).sessionsHelp},
		{"reclaim", "run or plan reclaimer passes; its status, reports and orphans", (*Client).reclaimCmd, (*Client).reclaimHelp},
		{"frontier", "report or list how far replica and backup planes have come", (*Client).frontierCmd, (*Client).frontierHelp},
		{"trash", "list deleted reference objects' digests, or restore them", (*Client).trashCmd, (*Client).trashHelp},
		{"explain", "why the reclaimer keeps, marks, holds or would delete an upload or a blob", (*Client).explainCmd, (*Client).explainHelp},
		{"shards", "list which etcd shard holds each bucket, or move a bucket to another shard", (*Client).shardsCmd, (*Client).shardsHelp},
		{"migrate", "plan or run the move of etcd state to this release's keyspace schema", (*Client).migrateCmd, (*Client).migrateHelp},
		{"reload", "make a running gateway read its credentials and TLS certificates again", (*Client).reloadCmd, (*Client).reloadHelp},
		{"config", "check a configuration as serve would read it, and what a reload would change", (*Client).configCmd, (*Client).configHelp},
		{"healthcheck", "probe a running gateway's /healthz or /readyz (for HEALTHCHECK)", (*Client).healthcheckCmd, (*Client).healthcheckHelp},
		{"version", "print the version and build information", (*Client).versionCmd, (*Client).versionHelp},
	}
}

// UsageError writes to stderr that command cmd's command line cannot be
// parsed, and returns ExitUsage.
func UsageError(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "sweepgate %s: %v\nRun 'sweepgate %s --help' for usage.\n", cmd, err, cmd)
	return ExitUsage
}

// usageError reports a command line that cannot be parsed.
func (c *Client) usageError(cmd string, err error) int {
	return UsageError(c.Stderr, cmd, err)
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
func (c *Client) runSubcommand(ctx context.Context, group string, help func(io.Writer), args []string, subs ...subcommand) int {
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
		help(c.Stdout)
		return ExitOK
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, args[1:])
		}
	}
	return c.usageError(group, fmt.Errorf("unknown subcommand %q: want %s", args[0], want))
}
