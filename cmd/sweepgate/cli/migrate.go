package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

const (
	migratePlanPath = "/admin/v1/migrate/plan"
	migrateRunPath  = "/admin/v1/migrate/run"
)

func (c *Client) migrateHelp(w io.Writer) {
	fmt.Fprintf(w, `Usage: sweepgate migrate [--apply [--force] [--principal NAME]] [flags]

Moves the state sweepgate keeps in etcd to the newest keyspace schema this
release writes (docs/upgrading.md, "Migrations"). Without --apply it
prints the plan and changes nothing: the stored schema, the steps a run
would take and how many records each would rewrite, a run a stopped
migration left, and the live gateways that do not read the new schema.

With --apply the elected reclaimer runs the migration under its term,
between passes (--admin must name the leader's admin API; another
gateway answers who leads). It first records the new schema, then
rewrites the records in batches; it can be stopped anywhere and run again
to go on, and running it when nothing is left only checks. It refuses
while a live gateway does not read the new schema, naming it: upgrade
every gateway first. Take an etcd snapshot before: going back to an older
release after a migration means restoring it.

Flags:
%s  --apply         run the migration (without it: print the plan)
  --force         with --apply: run although live gateways do not read
                  the new schema; they then refuse every request that
                  writes state until upgraded
  --principal     who migrates, recorded with the migration (default
                  $USER)
  --shard NAME    the keyspace of etcd shard NAME (etcd.shards; default:
                  the default shard): each shard has its own schema and
                  migration, run by its own reclaimer's leader; migrate
                  every shard
  --json          print the API's JSON document

Exit status: 0 planned, or migrated; 1 the migration stopped (run it
again to go on) or the admin API is unreachable; 2 bad command line; 4
refused: the gateway does not lead, or a live gateway does not read the
new schema; 5 the admin API refused the request for want of the right
admin token.
`, adminFlagsHelp(18))
}

// migrateCmd plans, or with --apply runs, a keyspace migration.
func (c *Client) migrateCmd(ctx context.Context, args []string) int {
	const name = "migrate"
	var apply, force bool
	var principal string
	f, pos, code, ok := c.parseAdminFlags(name, args, (*Client).migrateHelp, func(fs *flag.FlagSet) {
		fs.BoolVar(&apply, "apply", false, "")
		c.shardFlag(fs)
		fs.BoolVar(&force, "force", false, "")
		fs.StringVar(&principal, "principal", "", "")
	})
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	if force && !apply {
		return c.usageError(name, errors.New("--force goes with --apply"))
	}
	if !apply {
		return c.migratePlan(ctx, f)
	}
	if principal == "" {
		principal = envValue(c.Environ, "USER")
	}
	if principal == "" {
		return c.usageError(name, errors.New("--principal: who migrates is recorded with the migration, and $USER is not set"))
	}
	// A migration rewrites every record of a kind: it may take longer than
	// one ordinary admin request, and the command waits for it.
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodPost, path: migrateRunPath,
		body: adminapi.MigrationRequest{Principal: principal, Force: force}})
	if code != ExitOK {
		return code
	}
	switch status {
	case http.StatusOK:
	case http.StatusConflict:
		var blocked adminapi.MigrationBlocked
		if json.Unmarshal(body, &blocked) == nil && blocked.Error.Code == adminapi.CodeMigrationBlocked {
			if f.json {
				c.writeIndented(name, body)
			} else {
				fmt.Fprintf(c.Stderr, "sweepgate migrate: refused: %s\n", blocked.Error.Message)
			}
			return ExitRefused
		}
		return c.apiFailure(name, f.admin+migrateRunPath, status, body)
	default:
		return c.apiFailure(name, f.admin+migrateRunPath, status, body)
	}
	var ans adminapi.MigrationResult
	if json.Unmarshal(body, &ans) != nil || ans.Steps == nil {
		return c.apiFailure(name, f.admin+migrateRunPath, status, body)
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	if ans.Shard != "" {
		fmt.Fprintf(c.Stdout, "Shard %s:\n", ans.Shard)
	}
	if len(ans.Steps) == 0 {
		fmt.Fprintf(c.Stdout, "Nothing to migrate: the keyspace is in schema %d.\n", ans.To)
	} else {
		fmt.Fprintf(c.Stdout, "Migrated from schema %d to %d under reclaimer term %d.\n", ans.From, ans.To, ans.Term)
	}
	for _, s := range ans.Steps {
		resumed := ""
		if s.Resumed {
			resumed = ", resumed"
		}
		fmt.Fprintf(c.Stdout, "  %d to %d: %s: %d records read, %d rewritten, %d left unreadable%s\n", s.From, s.To, s.Name, s.Scanned, s.Rewritten, s.Skipped, resumed)
	}
	if ck := ans.Check; ck != nil {
		fmt.Fprintf(c.Stdout, "  checked %d records of the last step: %d rewritten\n", ck.Scanned, ck.Rewritten)
	}
	return ExitOK
}

func (c *Client) migratePlan(ctx context.Context, f adminFlags) int {
	const name = "migrate"
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodGet, path: migratePlanPath, timeout: adminClientTimeout})
	if code != ExitOK {
		return code
	}
	var p adminapi.MigrationPlan
	if status != http.StatusOK || json.Unmarshal(body, &p) != nil || p.Target == 0 {
		return c.apiFailure(name, f.admin+migratePlanPath, status, body)
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	if p.Shard != "" {
		fmt.Fprintf(c.Stdout, "Shard %s:\n", p.Shard)
	}
	fmt.Fprintf(c.Stdout, "The keyspace is in schema %d; this release writes schema %d.\n", p.Stored, p.Target)
	if ip := p.InProgress; ip != nil {
		fmt.Fprintf(c.Stdout, "A migration from %d to %d is in progress (scan %d, %d rewritten, term %d, by %s, since %s): run with --apply to go on.\n",
			ip.From, ip.To, ip.Scan, ip.Rewritten, ip.Term, ip.By, when(ip.Started))
	}
	if len(p.Steps) == 0 {
		fmt.Fprintln(c.Stdout, "Nothing to migrate.")
		return ExitOK
	}
	for _, s := range p.Steps {
		fmt.Fprintf(c.Stdout, "  %d to %d: %s: %d of %d records to rewrite\n", s.From, s.To, s.Name, s.Rewritten, s.Scanned)
	}
	for _, g := range p.Blocked {
		fmt.Fprintf(c.Stdout, "Held back by the live gateway %s (sweepgate %s), which reads schemas %d to %d: upgrade it first.\n", g.ID, g.Release, g.SchemaMin, g.Schema)
	}
	fmt.Fprintln(c.Stdout, "Nothing was changed; run with --apply to migrate.")
	return ExitOK
}
