package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

func (c *Client) reclaimHelp(w io.Writer) {
	fmt.Fprintf(w, `Usage: sweepgate reclaim run [--json]
       sweepgate reclaim plan [--json]
       sweepgate reclaim status [--json]
       sweepgate reclaim reports [--limit N] [--json]
       sweepgate reclaim orphans [list] [--fresh] [--limit N] [--json]
       sweepgate reclaim orphans adopt --principal OWNER REF
       sweepgate reclaim orphans delete [--confirm] [--principal WHO] REF...
       sweepgate reclaim resume [--uploads] [--digests] [--principal WHO]

Drives the reclaimer of a running sweepgate through its admin API
(/admin/v1/reclaim, see docs/admin-api.md). The reclaimer marks uploads
idle past reclaim.grace as expired, and deletes them on a later pass once
they stayed expired for reclaim.delete_after; uploads without a session
(orphans) are only held and listed, for a person to adopt or delete.

  run      run a pass now on the leader and print its report (the leader
           is the gateway that won the reclaimer election; another gateway
           answers with the leader's name)
  plan     build the plan a pass would make now and print it; changes
           nothing, on any gateway
  status   who leads, in which term, the pass in progress and the newest
           pass report
  reports  the newest pass reports, one line each
  orphans  list the orphans the newest pass held (--fresh: list the
           backend now); adopt one (a session owned by OWNER is created,
           so it follows the normal grace period from now on); or delete
           named ones, which needs --confirm (without it, nothing is
           deleted and the command shows what would be)
  resume   lift the pause the breaker put on a sweep: a plan the breaker
           refuses pauses its sweep (uploads or digests) in etcd, and every
           later pass of any leader plans and reports but marks and deletes
           nothing until a person resumes it; 'status' shows each pause and
           why. Resuming a sweep that is not paused changes nothing. The
           resume is recorded in the audit log with the principal

REF names an upload as BUCKET/KEY?uploadId=ID, the form 'orphans' prints;
quote it for the shell.

Flags:
%s  --json             print the API's JSON document instead of tables
  --limit N          reports: at most N (1 to %d, default %d);
                     orphans: at most N listed (1 to %d, default %d)
  --fresh            orphans: list the backend now instead of reading the
                     newest pass report
  --principal P      adopt: the principal that owns the upload from now on
                     (required); delete, resume: who acts, recorded with
                     it (default $USER)
  --confirm          delete: really delete
  --uploads          resume: the upload sweep (with neither flag: both)
  --digests          resume: the digest sweep (with neither flag: both)
  --shard NAME       run, plan, status, reports, orphans list, resume: the
                     reclaimer of etcd shard NAME (etcd.shards; default:
                     the default shard); status --shard all: every
                     shard's. adopt and delete go to the shard that holds
                     the upload's bucket

On a terminal, run and plan show their progress on standard error.

Examples:
  sweepgate reclaim plan
  sweepgate reclaim run --json | jq '.uploads.delete'
  sweepgate reclaim status || echo "the last pass did not do its work"
  sweepgate reclaim orphans --fresh
  sweepgate reclaim orphans adopt --principal backup 'backups/db?uploadId=2~x'
  sweepgate reclaim orphans delete 'backups/old.iso?uploadId=9~a1'   # a preview
  sweepgate reclaim orphans delete --confirm 'backups/old.iso?uploadId=9~a1'
  sweepgate reclaim resume --uploads
  sweepgate reclaim status --shard all
  sweepgate reclaim run --shard logs
  SWEEPGATE_ADMIN_URL=http://10.0.0.7:9001 sweepgate reclaim status

Exit status: 0 done; 1 error (admin API unreachable, etcd unavailable, this
gateway does not lead: the message names the leader); 2 bad command line;
3 no such upload; 4 the reclaimer did not do its work: the breaker refused
the pass (or would refuse the plan), the pass stopped (status: the newest
pass report says so), a delete was not confirmed or left uploads in place;
5 the admin API refused the request for want of the right admin token.
`, adminFlagsHelp(21), adminapi.MaxReportsLimit, adminapi.DefaultReportsLimit, adminapi.MaxOrphansLimit, adminapi.DefaultOrphansLimit)
}

func (c *Client) reclaimCmd(ctx context.Context, args []string) int {
	return c.runSubcommand(ctx, "reclaim", c.reclaimHelp, args,
		subcommand{"run", c.reclaimRun}, subcommand{"plan", c.reclaimPlan}, subcommand{"status", c.reclaimStatus},
		subcommand{"reports", c.reclaimReports}, subcommand{"orphans", c.reclaimOrphans}, subcommand{"resume", c.reclaimResume})
}

// reclaimFlags are the flags of the reclaim subcommands; each takes some.
type reclaimFlags struct {
	admin     string
	json      bool
	limit     int
	fresh     bool
	principal string
	confirm   bool
	uploads   bool
	digests   bool
}

// reclaim subcommand flag sets.
const (
	withLimit = 1 << iota
	withFresh
	withPrincipal
	withConfirm
	withSweeps
	withShard
)

func (c *Client) parseReclaimFlags(name string, args []string, with int, defLimit int) (reclaimFlags, []string, int, bool) {
	f := reclaimFlags{limit: defLimit}
	af, pos, code, ok := c.parseAdminFlags(name, args, (*Client).reclaimHelp, func(fs *flag.FlagSet) {
		if with&withShard != 0 {
			c.shardFlag(fs)
		}
		if with&withLimit != 0 {
			fs.IntVar(&f.limit, "limit", defLimit, "")
		}
		if with&withFresh != 0 {
			fs.BoolVar(&f.fresh, "fresh", false, "")
		}
		if with&withPrincipal != 0 {
			fs.StringVar(&f.principal, "principal", "", "")
		}
		if with&withConfirm != 0 {
			fs.BoolVar(&f.confirm, "confirm", false, "")
		}
		if with&withSweeps != 0 {
			fs.BoolVar(&f.uploads, "uploads", false, "")
			fs.BoolVar(&f.digests, "digests", false, "")
		}
	})
	f.admin, f.json = af.admin, af.json
	return f, pos, code, ok
}

// noArgs refuses positional arguments.
func (c *Client) noArgs(name string, pos []string) (int, bool) {
	if len(pos) > 0 {
		return c.usageError(name, fmt.Errorf("unexpected argument %q", strings.Join(pos, " "))), false
	}
	return ExitOK, true
}

func (c *Client) reclaimRun(ctx context.Context, args []string) int {
	const name = "reclaim run"
	f, pos, code, ok := c.parseReclaimFlags(name, args, withShard, 0)
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	return c.passCommand(ctx, name, f, adminRequest{method: http.MethodPost, path: "/admin/v1/reclaim/run", body: struct{}{}})
}

func (c *Client) reclaimPlan(ctx context.Context, args []string) int {
	const name = "reclaim plan"
	f, pos, code, ok := c.parseReclaimFlags(name, args, withShard, 0)
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	return c.passCommand(ctx, name, f, adminRequest{method: http.MethodGet, path: "/admin/v1/reclaim/plan"})
}

// passCommand runs a pass or a plan and prints its report. On a terminal
// it asks for the streamed answer and shows the progress lines.
func (c *Client) passCommand(ctx context.Context, name string, f reclaimFlags, req adminRequest) int {
	progress := c.terminal(c.Stderr)
	if progress {
		req.query = url.Values{"progress": {"1"}}
	}
	resp, done, code := c.adminSend(ctx, name, f.admin, req)
	if code != ExitOK {
		return code
	}
	defer done()
	var body []byte
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		line, code := c.readStream(name, resp.Body)
		if code != ExitOK {
			return code
		}
		if line.Report == nil {
			e := adminapi.ErrorDetail{Code: adminapi.CodeReclaimFailed, Message: "the answer ended without a report"}
			if line.Error != nil {
				e = *line.Error
			}
			fmt.Fprintf(c.Stderr, "sweepgate %s: %s\n", name, e.Message)
			return ExitError
		}
		body, _ = json.Marshal(line.Report)
	} else {
		var err error
		if body, err = io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer)); err != nil {
			fmt.Fprintf(c.Stderr, "sweepgate %s: reading the admin API's answer: %v\n", name, err)
			return ExitError
		}
		if resp.StatusCode != http.StatusOK {
			return c.apiFailure(name, req.url(f.admin), resp.StatusCode, body)
		}
	}
	var rep adminapi.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not a pass report: %v\n", name, f.admin, err)
		return ExitError
	}
	if f.json {
		if code := c.writeIndented(name, body); code != ExitOK {
			return code
		}
	} else {
		writeReport(c.Stdout, &rep)
	}
	return passExit(&rep)
}

// passExit is the exit status a report means: 4 when the pass did not do
// its work.
func passExit(rep *adminapi.Report) int {
	if rep.Refused != "" || rep.Stopped != "" {
		return ExitRefused
	}
	return ExitOK
}

// readStream reads a streamed pass, showing its progress lines on the
// terminal, and returns its last line.
func (c *Client) readStream(name string, r io.Reader) (adminapi.StreamLine, int) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxAdminAnswer)
	shown := false
	defer func() {
		if shown {
			fmt.Fprint(c.Stderr, "\r\x1b[K")
		}
	}()
	for sc.Scan() {
		var line adminapi.StreamLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API answered a line that is not JSON: %v\n", name, err)
			return line, ExitError
		}
		if line.Progress == nil {
			return line, ExitOK
		}
		fmt.Fprint(c.Stderr, "\r\x1b[K"+progressText(line.Progress, time.Now()))
		shown = true
	}
	err := sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	fmt.Fprintf(c.Stderr, "sweepgate %s: the answer ended early: %v (a pass keeps running on the leader; see 'sweepgate reclaim status')\n", name, err)
	return adminapi.StreamLine{}, ExitError
}

// progressText is one line about a pass in progress.
func progressText(p *adminapi.Progress, now time.Time) string {
	kind := "pass"
	if p.DryRun {
		kind = "plan"
	}
	u := p.Uploads
	seen := u.Keep.Sessions + u.Mark.Sessions + u.Delete.Sessions + u.Hold.Sessions
	s := fmt.Sprintf("%s %d: %s", kind, p.Pass, p.Phase)
	if p.Bucket != "" {
		s += " " + cell(p.Bucket)
	}
	s += fmt.Sprintf(", %d uploads seen (keep %d, mark %d, delete %d, hold %d)", seen, u.Keep.Sessions, u.Mark.Sessions, u.Delete.Sessions, u.Hold.Sessions)
	if a := p.Acted; a.Marked.Sessions+a.Deleted.Sessions+a.CleanupPending.Sessions+a.Changed.Sessions > 0 {
		s += fmt.Sprintf(", marked %d, deleted %d", a.Marked.Sessions, a.Deleted.Sessions)
	}
	if !p.Started.IsZero() {
		s += ", " + now.Sub(p.Started).Truncate(time.Second).String()
	}
	return s
}

// terminal says whether w is a terminal.
func (c *Client) terminal(w io.Writer) bool {
	if c.IsTerminal != nil {
		return c.IsTerminal(w)
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (c *Client) reclaimStatus(ctx context.Context, args []string) int {
	const name = "reclaim status"
	f, pos, code, ok := c.parseReclaimFlags(name, args, withShard, 0)
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	body, code := c.adminGet(ctx, name, f.admin, "/admin/v1/reclaim/status", nil)
	if code != ExitOK {
		return code
	}
	if c.adminShard == "all" {
		return c.shardStatuses(name, f, body)
	}
	var st adminapi.ReclaimStatus
	if err := json.Unmarshal(body, &st); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not a reclaimer status: %v\n", name, f.admin, err)
		return ExitError
	}
	if f.json {
		if code := c.writeIndented(name, body); code != ExitOK {
			return code
		}
	} else {
		writeStatus(c.Stdout, &st, time.Now())
	}
	if st.Pass == 0 {
		return ExitOK
	}
	return passExit(&st.Report)
}

func (c *Client) reclaimReports(ctx context.Context, args []string) int {
	const name = "reclaim reports"
	f, pos, code, ok := c.parseReclaimFlags(name, args, withLimit|withShard, adminapi.DefaultReportsLimit)
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	if f.limit < 1 || f.limit > adminapi.MaxReportsLimit {
		return c.usageError(name, fmt.Errorf("--limit %d: want 1 to %d", f.limit, adminapi.MaxReportsLimit))
	}
	body, code := c.adminGet(ctx, name, f.admin, "/admin/v1/reclaim/reports", url.Values{"limit": {strconv.Itoa(f.limit)}})
	if code != ExitOK {
		return code
	}
	var reps adminapi.Reports
	if err := json.Unmarshal(body, &reps); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not a report list: %v\n", name, f.admin, err)
		return ExitError
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	if len(reps.Reports) == 0 {
		fmt.Fprintln(c.Stdout, "No pass reports yet.")
		return ExitOK
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PASS\tTERM\tSTARTED\tTOOK\tRESULT\tKEEP\tMARK\tDELETE\tHOLD\tMARKED\tDELETED")
	for _, r := range reps.Reports {
		u, a := r.Uploads, r.Acted
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Pass, r.Term, when(r.Started), took(r.Started, r.Finished), result(&r),
			u.Keep.Parts, u.Mark.Parts, u.Delete.Parts, u.Hold.Parts, a.Marked.Parts, a.Deleted.Parts)
	}
	tw.Flush()
	fmt.Fprintln(c.Stdout, "(counts are parts)")
	return ExitOK
}

// result says in a word or two how a pass ended.
func result(r *adminapi.Report) string {
	switch {
	case r.Refused != "":
		return "REFUSED"
	case r.Stopped != "":
		return "STOPPED"
	case r.DryRun:
		return "dry run"
	}
	return "ok"
}

func took(from, to time.Time) string {
	if from.IsZero() || to.IsZero() {
		return "-"
	}
	d := to.Sub(from)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// writeReport prints a pass report as tables.
func writeReport(w io.Writer, r *adminapi.Report) {
	head := fmt.Sprintf("Pass %d", r.Pass)
	if r.DryRun {
		head = fmt.Sprintf("Plan for pass %d (a dry run: nothing was changed)", r.Pass)
	}
	fmt.Fprintf(w, "%s, term %d, started %s, took %s\n", head, r.Term, when(r.Started), took(r.Started, r.Finished))
	switch {
	case r.Refused != "" && r.DryRun:
		fmt.Fprintf(w, "The breaker would REFUSE this plan: %s\n", r.Refused)
	case r.Refused != "":
		fmt.Fprintf(w, "REFUSED by the breaker, nothing marked or deleted: %s\n", r.Refused)
	case r.Stopped != "":
		fmt.Fprintf(w, "STOPPED, nothing further marked or deleted: %s\n", r.Stopped)
	}
	if r.Revision != 0 {
		fmt.Fprintf(w, "Decided at %s from the sessions at etcd revision %d", when(r.Clock), r.Revision)
		if r.Resumed > 0 {
			fmt.Fprintf(w, "; resumed %d time(s)", r.Resumed)
		}
		fmt.Fprintln(w)
	}
	writeSlices(w, r)
	if len(r.DeniedBuckets) > 0 {
		fmt.Fprintf(w, "SKIPPED, the backend denies the reclaimer's key (AccessDenied): %s\n", strings.Join(r.DeniedBuckets, ", "))
	}
	if r.Digests != nil && len(r.Digests.DeniedBuckets) > 0 {
		fmt.Fprintf(w, "DIGESTS: the backend denies the reclaimer's key (AccessDenied): %s\n", strings.Join(r.Digests.DeniedBuckets, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLAN\tUPLOADS\tPARTS\tBYTES")
	row := func(name string, c adminapi.Count) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", name, c.Sessions, c.Parts, shortSize(c.Bytes))
	}
	row("keep", r.Uploads.Keep)
	row("mark", r.Uploads.Mark)
	row("delete", r.Uploads.Delete)
	row("hold", r.Uploads.Hold)
	tw.Flush()

	if !r.DryRun {
		a := r.Acted
		fmt.Fprintf(w, "\nDone: marked %d upload(s) (%d parts), deleted %d (%d parts, %s)", a.Marked.Sessions, a.Marked.Parts,
			a.Deleted.Sessions, a.Deleted.Parts, shortSize(a.Deleted.Bytes))
		if a.CleanupPending.Sessions > 0 {
			fmt.Fprintf(w, ", %d left cleanup_pending (the backend's answer was unclear; the reconciler settles them)", a.CleanupPending.Sessions)
		}
		if a.Changed.Sessions > 0 {
			fmt.Fprintf(w, ", %d skipped because they changed since the plan", a.Changed.Sessions)
		}
		if a.AroundGateway.Sessions > 0 {
			fmt.Fprintf(w, ", %d kept for a part on the backend the gateway did not see (a writer around the gateway)", a.AroundGateway.Sessions)
		}
		if a.Unread.Sessions > 0 {
			fmt.Fprintf(w, ", %d kept because their parts could not be read", a.Unread.Sessions)
		}
		fmt.Fprintln(w)
	}
	if b := r.Breaker; b.StoredParts > 0 || b.DeleteParts > 0 {
		limit := "none"
		if b.MaxDelete >= 0 {
			limit = strconv.FormatInt(b.MaxDelete, 10)
		}
		fmt.Fprintf(w, "Breaker: the plan deletes %d of %d stored parts; max_delete %s, max_delete_fraction %g\n", b.DeleteParts, b.StoredParts, limit, b.MaxDeleteFraction)
		fmt.Fprintf(w, "         deletes %d of %d stored uploads; max_delete_uploads %s, max_delete_uploads_fraction %g\n", b.DeleteUploads, b.StoredUploads, limitText(b.MaxDeleteUploads), b.MaxDeleteUploadsFraction)
		fmt.Fprintf(w, "         marks %d of %d stored uploads; max_mark %s, max_mark_fraction %g\n", b.MarkUploads, b.StoredUploads, limitText(b.MaxMark), b.MaxMarkFraction)
	}

	if n := r.Totals.Stuck; n > 0 {
		fmt.Fprintf(w, "\nStuck (completing for longer than the stuck limit; never deleted, look at them): %d\n", n)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BUCKET\tKEY\tUPLOAD ID\tSINCE")
		for _, s := range r.Stuck {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(s.Bucket), cell(s.Key), cell(s.UploadID), when(s.Since))
		}
		tw.Flush()
	}
	if n := r.Totals.Orphans; n > 0 {
		fmt.Fprintf(w, "\nOrphans (no session; held, never deleted by a pass; see 'sweepgate reclaim orphans'): %d\n", n)
		writeOrphans(w, r.Orphans)
	}
	if n := r.Totals.Missing; n > 0 {
		fmt.Fprintf(w, "\nSessions whose upload the backend does not have: %d\n", n)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BUCKET\tKEY\tUPLOAD ID\tSTATE\tLAST ACTIVITY")
		for _, m := range r.Missing {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(m.Bucket), cell(m.Key), cell(m.UploadID), cell(string(m.State)), when(m.LastActivity))
		}
		tw.Flush()
	}
	for _, l := range [][3]int64{{int64(len(r.Stuck)), r.Totals.Stuck}, {int64(len(r.Orphans)), r.Totals.Orphans}, {int64(len(r.Missing)), r.Totals.Missing}} {
		if l[0] < l[1] {
			fmt.Fprintln(w, "(The lists are cut short; the counts are complete.)")
			break
		}
	}
}

// writeStatus prints a reclaimer status.
func writeStatus(w io.Writer, st *adminapi.ReclaimStatus, now time.Time) {
	rc := st.Reclaimer
	if st.Shard != "" {
		fmt.Fprintf(w, "Shard: %s\n", st.Shard)
	}
	switch {
	case rc.Leading:
		fmt.Fprintf(w, "Reclaimer: this gateway (%s) leads, term %d.\n", rc.ID, rc.Term)
	case rc.Leader != nil:
		fmt.Fprintf(w, "Reclaimer: %s leads, term %d; this gateway (%s) does not.\n", rc.Leader.ID, rc.Leader.Term, rc.ID)
	default:
		fmt.Fprintf(w, "Reclaimer: no gateway leads now; this one is %s.\n", rc.ID)
	}
	var notes []string
	if !rc.Enabled {
		notes = append(notes, "this gateway does not campaign (reclaim.enabled is off)")
	}
	if rc.DryRun {
		notes = append(notes, "reclaim.dry_run is on here: its passes change nothing")
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "Note: %s.\n", strings.Join(notes, "; "))
	}
	for _, p := range st.Paused {
		fmt.Fprintf(w, "PAUSED: the %s sweep, since pass %d (term %d, %s): the breaker refused its plan: %s\n  It marks and deletes nothing until a person runs 'sweepgate reclaim resume --%s'.\n",
			p.Sweep, p.Pass, p.Term, when(p.At), p.Reason, p.Sweep)
	}
	if m := st.Restored; m != nil && m.Cleared == nil {
		fmt.Fprintf(w, "ETCD RESTORED: found %s (term %d, revision %d): %s\n  No pass marks, aborts or deletes until every gateway has published its clock since and a rebuild started after it has finished (docs/runbook.md, SweepgateEtcdRestored).\n",
			when(m.DetectedAt), m.Term, m.Revision, m.Reason)
	}
	if p := st.InProgress; p != nil {
		fmt.Fprintf(w, "In progress: %s\n", progressText(p, now))
	}
	fmt.Fprintln(w)
	if st.Pass == 0 {
		fmt.Fprintln(w, "No pass report yet.")
		return
	}
	fmt.Fprintln(w, "Newest pass report:")
	writeReport(w, &st.Report)
}

// shortSize is a byte count for a table cell.
func shortSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		v, suffix = v/unit, s
		if v < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
