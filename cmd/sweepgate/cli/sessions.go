package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/etcdstore"
)

func (c *Client) sessionsHelp(w io.Writer) {
	fmt.Fprintf(w, `Usage: sweepgate sessions list [flags]
       sweepgate sessions show [flags] BUCKET UPLOADID

Reads the upload sessions a running sweepgate keeps in etcd, through its
admin API (GET /admin/v1/sessions, see docs/admin-api.md).

  list   one line per session: bucket, upload id, state, owner, latest
         activity and object key, in bucket and upload id order
  show   one session: its state, times and completion result, the history
         of its transitions (when, from, to, who, why) and its recorded parts

Flags:
%s  --json          print the API's JSON document instead of a table
  --state S       list: only sessions in state S (several: S1,S2)
  --bucket B      list: only sessions of bucket B
  --limit N       list: at most N sessions (1 to %d, default %d)
  --after CURSOR  list: continue after the last session of an earlier list
                  (its "next" value, which a truncated list prints)
  --shard NAME    list: the sessions of etcd shard NAME (etcd.shards;
                  default: the shard of --bucket, else the default shard),
                  or of every shard with --shard all; show reads the
                  shard that holds BUCKET

States: %s.

Examples:
  sweepgate sessions list
  sweepgate sessions list --state expired,cleanup_pending
  sweepgate sessions list --bucket backups --limit 1000 --json | jq -r '.sessions[].upload_id'
  sweepgate sessions show backups 2~xPk3aJ0qT
  sweepgate sessions list --shard all
  SWEEPGATE_ADMIN_URL=http://10.0.0.7:9001 sweepgate sessions list --state completing

Exit status: 0 done, 1 error (admin API unreachable, etcd unavailable),
2 bad command line, 3 no such session, 5 the admin API refused the request
for want of the right admin token.
`, adminFlagsHelp(18), adminapi.MaxListLimit, adminapi.DefaultListLimit, stateNames())
}

func (c *Client) sessionsCmd(ctx context.Context, args []string) int {
	return c.runSubcommand(ctx, "sessions", c.sessionsHelp, args,
		subcommand{"list", c.sessionsList}, subcommand{"show", c.sessionsShow})
}

// sessionsFlags are the flags both subcommands take.
type sessionsFlags struct {
	admin  string
	json   bool
	state  string
	bucket string
	limit  int
	after  string
}

func (c *Client) parseSessionsFlags(name string, args []string, forList bool) (sessionsFlags, []string, int, bool) {
	f := sessionsFlags{limit: adminapi.DefaultListLimit}
	af, pos, code, ok := c.parseAdminFlags(name, args, (*Client).sessionsHelp, func(fs *flag.FlagSet) {
		if forList {
			c.shardFlag(fs) // show goes to its bucket's shard
		}
		if forList {
			fs.StringVar(&f.state, "state", "", "")
			fs.StringVar(&f.bucket, "bucket", "", "")
			fs.IntVar(&f.limit, "limit", adminapi.DefaultListLimit, "")
			fs.StringVar(&f.after, "after", "", "")
		}
	})
	f.admin, f.json = af.admin, af.json
	return f, pos, code, ok
}

func (c *Client) sessionsList(ctx context.Context, args []string) int {
	const name = "sessions list"
	f, pos, code, ok := c.parseSessionsFlags(name, args, true)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageError(name, fmt.Errorf("unexpected argument %q (filter with --bucket and --state)", strings.Join(pos, " ")))
	}
	q := url.Values{}
	if f.state != "" {
		for _, s := range strings.Split(f.state, ",") {
			if !slices.Contains(etcdstore.AllStates, etcdstore.SessionState(strings.TrimSpace(s))) {
				return c.usageError(name, fmt.Errorf("unknown state %q; the states are %s", s, stateNames()))
			}
		}
		q.Set("state", f.state)
	}
	if f.limit < 1 || f.limit > adminapi.MaxListLimit {
		return c.usageError(name, fmt.Errorf("--limit %d: want 1 to %d", f.limit, adminapi.MaxListLimit))
	}
	q.Set("limit", strconv.Itoa(f.limit))
	if f.bucket != "" {
		q.Set("bucket", f.bucket)
	}
	if f.after != "" {
		q.Set("after", f.after)
	}
	body, code := c.adminGet(ctx, name, f.admin, "/admin/v1/sessions", q)
	if code != ExitOK {
		return code
	}
	var list adminapi.SessionList
	if err := json.Unmarshal(body, &list); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not a session list: %v\n", name, f.admin, err)
		return ExitError
	}
	for _, w := range list.Warnings {
		fmt.Fprintf(c.Stderr, "warning: %s\n", w)
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	if len(list.Sessions) == 0 {
		fmt.Fprintln(c.Stdout, "No sessions match.")
		return ExitOK
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	// With etcd.shards every session names its shard, in a first column.
	sharded := list.Sessions[0].Shard != ""
	if sharded {
		fmt.Fprint(tw, "SHARD\t")
	}
	fmt.Fprintln(tw, "BUCKET\tUPLOAD ID\tSTATE\tOWNER\tLAST ACTIVITY\tKEY")
	for _, s := range list.Sessions {
		if sharded {
			fmt.Fprintf(tw, "%s\t", cell(s.Shard))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(s.Bucket), cell(s.UploadID), cell(s.State), cell(s.Owner), when(s.LastActivity), cell(s.Key))
	}
	tw.Flush()
	if list.Truncated {
		fmt.Fprintf(c.Stderr, "More sessions match than the %d shown; continue with --after %s\n", len(list.Sessions), shellWord(list.Next))
	}
	return ExitOK
}

func (c *Client) sessionsShow(ctx context.Context, args []string) int {
	const name = "sessions show"
	f, pos, code, ok := c.parseSessionsFlags(name, args, false)
	if !ok {
		return code
	}
	if len(pos) != 2 || pos[0] == "" || pos[1] == "" {
		return c.usageError(name, fmt.Errorf("want BUCKET and UPLOADID, got %d argument(s)", len(pos)))
	}
	path := "/admin/v1/sessions/" + url.PathEscape(pos[0]) + "/" + url.PathEscape(pos[1])
	body, code := c.adminGet(ctx, name, f.admin, path, nil)
	if code != ExitOK {
		return code
	}
	var ans adminapi.SessionAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not a session: %v\n", name, f.admin, err)
		return ExitError
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	writeSession(c.Stdout, &ans.Session)
	return ExitOK
}

func writeSession(w io.Writer, s *adminapi.SessionDetail) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Bucket", cell(s.Bucket))
	row("Key", cell(s.Key))
	row("Upload ID", cell(s.UploadID))
	row("State", fmt.Sprintf("%s since %s", cell(s.State), when(s.StateSince)))
	row("Owner", cell(s.Owner))
	if s.Shard != "" {
		row("Shard", cell(s.Shard))
	}
	row("Created", when(s.Created))
	last := when(s.LastActivity)
	if a := s.Activity; a != nil && a.At.Equal(s.LastActivity) {
		last += " (" + cell(a.What)
		if a.PartNumber > 0 {
			last += fmt.Sprintf(", part %d", a.PartNumber)
		}
		last += ")"
	}
	row("Last activity", last)
	if s.ExpiredAt != nil {
		row("Expired at", when(*s.ExpiredAt))
	}
	if s.Uncertain != "" {
		row("Uncertain", cell(s.Uncertain))
	}
	if s.AbortAttempts > 0 {
		row("Abort attempts", strconv.Itoa(s.AbortAttempts))
	}
	if s.ExpectedETag != "" {
		row("Expected ETag", cell(s.ExpectedETag))
	}
	if c := s.Completion; c != nil {
		v := "ETag " + cell(c.ETag)
		if c.VersionID != "" {
			v += ", version " + cell(c.VersionID)
		}
		row("Completed", v+", at "+when(c.At))
	}
	row("Mod revision", strconv.FormatInt(s.ModRevision, 10))
	tw.Flush()

	fmt.Fprintf(w, "\nHistory: %d transition(s)\n", len(s.History))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tFROM\tTO\tACTOR\tTERM\tREASON")
	for _, t := range s.History {
		term := "-"
		if t.Term != 0 {
			term = strconv.FormatInt(t.Term, 10)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", when(t.At), cell(t.From), cell(t.To), cell(t.Actor), term, cell(t.Reason))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nParts: %d, %s\n", s.PartCount, sizeText(s.PartBytes))
	if len(s.Parts) == 0 {
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  PART\tSIZE\tETAG\tSHA256\tAT")
	for _, p := range s.Parts {
		fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%s\n", p.PartNumber, p.Size, cell(p.ETag), cell(p.SHA256), when(p.At))
	}
	tw.Flush()
}

// cell makes a value safe for one table cell: "-" for nothing, and quoted
// when it holds a tab, a newline or another control character that would
// break the table (object keys may hold anything).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// shellWord quotes s for a shell when it holds anything but the characters
// a cursor usually has, so that a printed command can be pasted as it is.
func shellWord(s string) string {
	const safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~%/+-:=@,"
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return !strings.ContainsRune(safe, r) }) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// sizeText is a byte count as people read it, with the exact count.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		v, suffix = v/unit, s
		if v < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f %s (%d bytes)", v, suffix, n)
}

// stateNames lists the session states, for help and error texts.
func stateNames() string {
	names := make([]string, len(etcdstore.AllStates))
	for i, s := range etcdstore.AllStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
