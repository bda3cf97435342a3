package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
)

func (c *Client) frontierHelp(w io.Writer) {
	fmt.Fprintf(w, `Usage: sweepgate frontier report --plane NAME --revision N [--by WHO] [--json]
       sweepgate frontier list [--json]

Publishes and shows how far replica and backup planes have come, through
the admin API of a running sweepgate (/admin/v1/frontiers, see
docs/admin-api.md). The reclaimer deletes a blob only once every plane in
digests.planes has applied the etcd revision at which the blob was found
unreferenced, so that a replica or a backup never names a blob that is
already gone. A configured plane that has not reported counts as revision
0 and holds every delete.

  report  record that plane NAME has applied etcd revision N (the
          revision its copy of the data was taken at: a backup job reports
          the revision of the etcd snapshot it stored, a replica what it
          has replicated). N may not be ahead of etcd's current revision.
          A lower N than before is recorded too (a plane restored from an
          older backup goes back).
  list    every configured plane and every plane that reported: its
          revision, how many revisions it lags behind etcd, when it
          reported and who reported it

Flags:
%s  --json          print the API's JSON document instead of a table
  --plane NAME    report: the plane (required; no '/' or spaces)
  --revision N    report: the etcd revision it has applied (required)
  --by WHO        report: who reports, recorded with it (default: the
                  client's address as the gateway sees it)

Examples:
  sweepgate frontier list
  sweepgate frontier report --plane nightly-backup --revision 184467 --by backup-job
  rev=$(etcdctl endpoint status -w json | jq '.[0].Status.header.revision')
  sweepgate frontier report --plane dr-replica --revision "$rev"
  sweepgate frontier list --json | jq '.planes[] | select(.configured and .lag > 100000)'

Exit status: 0 done, 1 error (admin API unreachable, etcd unavailable),
2 bad command line or a report the API refused (a bad plane name, a
revision ahead of etcd's), 5 the admin API refused the request for want
of the right admin token.
`, adminFlagsHelp(18))
}

func (c *Client) frontierCmd(ctx context.Context, args []string) int {
	return c.runSubcommand(ctx, "frontier", c.frontierHelp, args,
		subcommand{"report", c.frontierReport}, subcommand{"list", c.frontierList})
}

func (c *Client) frontierReport(ctx context.Context, args []string) int {
	const name = "frontier report"
	var plane, revision, by string
	f, pos, code, ok := c.parseAdminFlags(name, args, (*Client).frontierHelp, func(fs *flag.FlagSet) {
		fs.StringVar(&plane, "plane", "", "")
		fs.StringVar(&revision, "revision", "", "")
		fs.StringVar(&by, "by", "", "")
	})
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	if plane == "" {
		return c.usageError(name, errors.New("--plane is required: the replica or backup plane that reports"))
	}
	if err := config.CheckPlane(plane); err != nil {
		return c.usageError(name, fmt.Errorf("--plane %q: %w", plane, err))
	}
	if revision == "" {
		return c.usageError(name, errors.New("--revision is required: the etcd revision the plane has applied"))
	}
	rev, err := strconv.ParseInt(revision, 10, 64)
	if err != nil || rev < 0 {
		return c.usageError(name, fmt.Errorf("--revision %q: want a whole number, 0 or more", revision))
	}
	path := "/admin/v1/frontiers/" + url.PathEscape(plane)
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodPost, path: path,
		body: adminapi.FrontierReport{Revision: &rev, By: by}, timeout: adminClientTimeout})
	if code != ExitOK {
		return code
	}
	if status != http.StatusOK {
		return c.apiFailure(name, f.admin+path, status, body)
	}
	var p adminapi.Plane
	if err := json.Unmarshal(body, &p); err != nil || p.Plane == "" {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not a plane's frontier: %s\n", name, f.admin, snippet(body, err))
		return ExitError
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	fmt.Fprintf(c.Stdout, "Recorded: plane %s has applied etcd revision %d (%d behind etcd's current revision), reported by %s at %s.\n",
		cell(p.Plane), p.Revision, p.Lag, cell(p.By), whenPtr(p.ReportedAt))
	if !p.Configured {
		fmt.Fprintf(c.Stdout, "Note: digests.planes does not list %s on this gateway, so its frontier holds no delete there.\n", cell(p.Plane))
	}
	return ExitOK
}

func (c *Client) frontierList(ctx context.Context, args []string) int {
	const name = "frontier list"
	f, pos, code, ok := c.parseAdminFlags(name, args, (*Client).frontierHelp, nil)
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	body, code := c.adminGet(ctx, name, f.admin, "/admin/v1/frontiers", nil)
	if code != ExitOK {
		return code
	}
	var list adminapi.Frontiers
	if err := json.Unmarshal(body, &list); err != nil || list.Planes == nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not a frontier list: %s\n", name, f.admin, snippet(body, err))
		return ExitError
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	writeFrontiers(c.Stdout, &list)
	return ExitOK
}

func writeFrontiers(w io.Writer, list *adminapi.Frontiers) {
	fmt.Fprintf(w, "etcd's current revision: %d\n", list.Revision)
	if len(list.Planes) == 0 {
		fmt.Fprintln(w, "No plane is configured (digests.planes) or has reported: deletes wait for no replica or backup.")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLANE\tREVISION\tLAG\tREPORTED\tBY\tCONFIGURED")
	unreported := 0
	for _, p := range list.Planes {
		rev, configured := strconv.FormatInt(p.Revision, 10), "no"
		if !p.Reported {
			rev = "0 (never)"
			if p.Configured {
				unreported++
			}
		}
		if p.Configured {
			configured = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", cell(p.Plane), rev, p.Lag, whenPtr(p.ReportedAt), cell(p.By), configured)
	}
	tw.Flush()
	if unreported > 0 {
		fmt.Fprintf(w, "\n%d configured plane(s) never reported: they count as revision 0 and hold every delete until they report.\n", unreported)
	}
}

// whenPtr is when for a time that may be absent.
func whenPtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return when(*t)
}

// snippet describes an answer that did not decode as expected.
func snippet(body []byte, err error) string {
	s := string(body[:min(len(body), 200)])
	if err != nil {
		return err.Error() + ": " + s
	}
	return s
}
