package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/shards"
)

func (c *Client) shardsHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: sweepgate shards list [serve's flags]
       sweepgate shards move BUCKET --to SHARD [--apply] [serve's flags]

Reads the configuration as 'sweepgate serve' would (--config FILE, else
$SWEEPGATE_CONFIG, the SWEEPGATE_* environment and serve's flags) and
connects to every shard of etcd.shards itself, not through a gateway.

list prints each shard with its endpoints, then the shard directory: each
bucket whose state was written, the shard that holds it and the shard the
configuration names, marked CONTRADICTS where they differ (serve refuses
to start then), and the moves in progress.

move moves BUCKET's state to SHARD: without --apply it prints the plan
(the keys by kind) and changes nothing. With --apply, while no gateway is
live in any shard (stop them all first), it records the move in the
default shard, copies every key of the bucket to SHARD, points the shard
directory at SHARD, and deletes the old keys. A move that stops is resumed
by running the same command again. A bucket of the digest layout is not
moved: the layout's state moves only as a whole. Afterwards, list BUCKET under SHARD in
etcd.shards (or under no shard, for the default one) before starting the
gateways; they refuse to start until the configuration agrees.

Exit status: 0 done, 1 refused or failed, 2 bad command line.
`)
}

// shardsCmd runs `sweepgate shards SUBCOMMAND`.
func (c *Client) shardsCmd(ctx context.Context, args []string) int {
	return c.runSubcommand(ctx, "shards", c.shardsHelp, args,
		subcommand{"list", c.shardsList}, subcommand{"move", c.shardsMove})
}

// shardsConfig loads serve's configuration with extra flags and connects
// to each shard.
func (c *Client) shardsConfig(name string, args []string, define func(*flag.FlagSet)) (*shards.Mover, *config.Config, int) {
	cfg, _, err := config.LoadWith(args, c.Environ, define)
	if err != nil {
		var usage *config.UsageError
		switch {
		case errors.Is(err, flag.ErrHelp):
			c.shardsHelp(c.Stdout)
			return nil, nil, ExitOK
		case errors.As(err, &usage):
			return nil, nil, c.usageError(name, err)
		}
		fmt.Fprintf(c.Stderr, "sweepgate %s: invalid configuration:\n  %s\n", name, strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return nil, nil, ExitError
	}
	if !cfg.Sharded() {
		fmt.Fprintf(c.Stderr, "sweepgate %s: etcd.shards is not configured: every bucket's state is in one store\n", name)
		return nil, nil, ExitError
	}
	m := &shards.Mover{Log: func(format string, args ...any) { fmt.Fprintf(c.Stdout, format+"\n", args...) }}
	for _, spec := range cfg.Shards() {
		creds, err := config.ShardCredentials(spec)
		if err != nil {
			fmt.Fprintf(c.Stderr, "sweepgate %s: %v\n", name, err)
			return nil, nil, ExitError
		}
		cli, err := etcdstore.Dial(spec.Endpoints, cfg.Etcd.DialTimeout, creds, slog.New(slog.DiscardHandler))
		if err != nil {
			closeShards(m)
			fmt.Fprintf(c.Stderr, "sweepgate %s: shard %s: %v\n", name, spec.Name, err)
			return nil, nil, ExitError
		}
		keys, _ := etcdstore.NewKeys(spec.Prefix)
		m.Shards = append(m.Shards, shards.Shard{Name: spec.Name, Cli: cli, Keys: keys})
	}
	return m, cfg, ExitOK
}

func closeShards(m *shards.Mover) {
	for _, s := range m.Shards {
		s.Cli.Close()
	}
}

// shardsTimeout bounds a list, and each step of a move.
const shardsTimeout = 5 * time.Minute

func (c *Client) shardsList(ctx context.Context, args []string) int {
	const name = "shards list"
	m, cfg, code := c.shardsConfig(name, args, nil)
	if m == nil {
		return code
	}
	defer closeShards(m)
	ctx, cancel := context.WithTimeout(ctx, shardsTimeout)
	defer cancel()
	specs := cfg.Shards()
	fmt.Fprintln(c.Stdout, "SHARD\tENDPOINTS\tPREFIX")
	for _, s := range specs {
		fmt.Fprintf(c.Stdout, "%s\t%s\t%s\n", s.Name, strings.Join(s.Endpoints, ","), s.Prefix)
	}
	def := m.Shards[0]
	dir := shards.NewDirectory(def.Cli, def.Keys)
	if err := dir.Load(ctx); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the default shard %s: %v\n", name, def.Name, err)
		return ExitError
	}
	all := dir.All()
	buckets := make([]string, 0, len(all))
	for b := range all {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets)
	fmt.Fprintln(c.Stdout, "\nBUCKET\tSHARD\tCONFIGURED")
	for _, b := range buckets {
		mark := ""
		if want := cfg.ShardOf(b); want != all[b] {
			mark = "\tCONTRADICTS: move it (sweepgate shards move " + b + " --to " + want + ") or configure it on " + all[b]
		}
		fmt.Fprintf(c.Stdout, "%s\t%s\t%s%s\n", b, all[b], cfg.ShardOf(b), mark)
	}
	moves, err := def.Cli.Get(ctx, def.Keys.ShardMoves(), clientv3.WithPrefix())
	if err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: %v\n", name, err)
		return ExitError
	}
	for _, kv := range moves.Kvs {
		fmt.Fprintf(c.Stdout, "\nmove in progress: %s\n", kv.Value)
	}
	return ExitOK
}

func (c *Client) shardsMove(ctx context.Context, args []string) int {
	const name = "shards move"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			c.shardsHelp(c.Stdout)
			return ExitOK
		}
		return c.usageError(name, errors.New("missing BUCKET"))
	}
	bucket := args[0]
	var to string
	var apply bool
	m, cfg, code := c.shardsConfig(name, args[1:], func(fs *flag.FlagSet) {
		fs.StringVar(&to, "to", "", "")
		fs.BoolVar(&apply, "apply", false, "")
	})
	if m == nil {
		return code
	}
	defer closeShards(m)
	if to == "" {
		return c.usageError(name, errors.New("missing --to SHARD"))
	}
	if cfg.InLayout(bucket) {
		fmt.Fprintf(c.Stderr, "sweepgate %s: %s holds part of the digest layout, whose state moves only as a whole; this command moves no layout bucket\n", name, bucket)
		return ExitError
	}
	ctx, cancel := context.WithTimeout(ctx, shardsTimeout)
	defer cancel()
	p, err := m.Plan(ctx, bucket, to)
	if err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: %v\n", name, err)
		return ExitError
	}
	kinds := make([]string, 0, len(p.Keys))
	for k, n := range p.Keys {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	verb := "would move"
	if apply {
		verb = "moves"
	}
	fmt.Fprintf(c.Stdout, "%s %s from shard %s to shard %s (phase %s, resumed %v): keys %s\n", verb, bucket, p.From, p.To, p.Phase, p.Resumed, strings.Join(kinds, ", "))
	if !apply {
		fmt.Fprintln(c.Stdout, "Nothing changed; run again with --apply, every gateway stopped.")
		return ExitOK
	}
	if err := m.Apply(ctx, p); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: %v\n", name, err)
		return ExitError
	}
	fmt.Fprintf(c.Stdout, "Done. Put %s on shard %s in etcd.shards before starting the gateways.\n", bucket, to)
	return ExitOK
}
