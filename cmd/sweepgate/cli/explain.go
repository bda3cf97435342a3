package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/cas"
)

// explainClientTimeout is above the server's own bound on an explanation.
const explainClientTimeout = adminapi.ExplainTimeout + 30*time.Second

func (c *Client) explainHelp(w io.Writer) {
	fmt.Fprintf(w, `Usage: sweepgate explain [flags] BUCKET UPLOADID
       sweepgate explain [flags] DIGEST

Says why the reclaimer keeps, marks, holds or would delete a multipart
upload or a content-addressed blob right now, and why one went, through
the admin API of a running sweepgate (GET /admin/v1/explain/..., see
docs/admin-api.md). The gateway runs the reclaimer's own checklist on what
etcd and the backend hold now, writing nothing, and shows every rule it
tried up to the one that decided, with the times and revisions it compared;
then the records behind the verdict.

  BUCKET UPLOADID  an upload: the backend's parts, the session's state,
                   last activity, grace, expired-at, delete-after, mod
                   revision; its transitions (when, who, which term, why)
  DIGEST           a blob (algorithm:hex): the stored copy and its age
                   against the placement grace, the references that name it
                   (which manifest), trash entries and their expiry,
                   placements, uploads in flight, its tombstone (state,
                   frontier, attempts) and each plane's revision against the
                   frontier, its guard

Verdicts: an upload is keep, mark, delete or hold, or absent (the backend
has no such upload). A blob is keep, tombstone (the next pass records a
pending tombstone), pending (its tombstone waits for a plane or a later
pass), delete (the next pass deletes it), deleted (gone: the tombstone
says when and by which pass) or absent (not stored).

Flags:
%s  --json          print the API's JSON document instead of the step list
  --key K         an upload without a session (an orphan): its object key,
                  which nothing records; without it the bucket's uploads
                  are listed to find it

Examples:
  sweepgate explain backups 2~xPk3aJ0qT
  sweepgate explain --key old.iso backups 9~a1
  sweepgate explain sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
  sweepgate explain backups 2~xPk3aJ0qT --json | jq '.steps[] | select(.matched)'

Exit status: 0 done (whatever the verdict), 1 error (admin API
unreachable, etcd or the backend unavailable, no reclaimer or no digest
sweep on the gateway), 2 bad command line, 3 nothing is known about the
upload or digest, 5 the admin API refused the request for want of the
right admin token.
`, adminFlagsHelp(18))
}

func (c *Client) explainCmd(ctx context.Context, args []string) int {
	const name = "explain"
	var key string
	f, pos, code, ok := c.parseAdminFlags(name, args, (*Client).explainHelp, func(fs *flag.FlagSet) {
		fs.StringVar(&key, "key", "", "")
	})
	if !ok {
		return code
	}
	var path string
	q := url.Values{}
	switch {
	case len(pos) == 1 && key != "":
		return c.usageError(name, fmt.Errorf("--key names the object of an upload: give BUCKET and UPLOADID too"))
	case len(pos) == 1 && !cas.Valid(pos[0]):
		return c.usageError(name, fmt.Errorf("%q is not a digest (algorithm:hex, such as sha256:9f86d0...); an upload is named by BUCKET and UPLOADID", pos[0]))
	case len(pos) == 1:
		path = "/admin/v1/explain/digests/" + url.PathEscape(pos[0])
	case len(pos) == 2 && pos[0] != "" && pos[1] != "":
		path = "/admin/v1/explain/uploads/" + url.PathEscape(pos[0]) + "/" + url.PathEscape(pos[1])
		if key != "" {
			q.Set("key", key)
		}
	default:
		return c.usageError(name, fmt.Errorf("want BUCKET UPLOADID or DIGEST, got %d argument(s)", len(pos)))
	}
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodGet, path: path, query: q, timeout: explainClientTimeout})
	if code != ExitOK {
		return code
	}
	if status != http.StatusOK {
		return c.apiFailure(name, f.admin+path, status, body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	// Numbers stay as written: a revision printed as 1.84467e+05 helps no one.
	dec.UseNumber()
	if len(pos) == 1 {
		var ex adminapi.DigestExplanation
		if err := dec.Decode(&ex); err != nil || ex.Verdict == "" {
			fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not an explanation: %s\n", name, f.admin, snippet(body, err))
			return ExitError
		}
		if f.json {
			return c.writeIndented(name, body)
		}
		writeDigestExplanation(c.Stdout, &ex)
		return ExitOK
	}
	var ex adminapi.UploadExplanation
	if err := dec.Decode(&ex); err != nil || ex.Verdict == "" {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not an explanation: %s\n", name, f.admin, snippet(body, err))
		return ExitError
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	writeUploadExplanation(c.Stdout, &ex)
	return ExitOK
}

func writeUploadExplanation(w io.Writer, ex *adminapi.UploadExplanation) {
	fmt.Fprintf(w, "Upload %s in bucket %s, key %s\n", cell(ex.UploadID), cell(ex.Bucket), cell(ex.Key))
	fmt.Fprintf(w, "Verdict: %s: %s\n", strings.ToUpper(ex.Verdict), ex.Reason)
	if ex.Stuck {
		fmt.Fprintln(w, "Flagged stuck: a person has to look at it.")
	}
	p := ex.Policy
	fmt.Fprintf(w, "Judged at %s (etcd revision %d); grace %s, delete after %s, stuck limit %s, clock skew %s.\n",
		when(ex.Now), ex.Revision, p.Grace, p.DeleteAfter, p.StuckLimit, p.ClockSkew)
	writeSteps(w, ex.Steps)

	fmt.Fprintln(w)
	switch b := ex.Backend; {
	case !b.Present:
		fmt.Fprintln(w, "Backend: no such upload")
	default:
		line := fmt.Sprintf("Backend: %d part(s), %s", b.Parts, sizeText(b.Bytes))
		if b.Initiated != nil {
			line += ", initiated " + when(*b.Initiated)
		}
		fmt.Fprintln(w, line)
	}
	if s := ex.Session; s != nil {
		fmt.Fprintf(w, "Session: %s since %s, owner %s, created %s, last activity %s, mod revision %d\n",
			cell(s.State), when(s.StateSince), cell(s.Owner), when(s.Created), when(s.LastActivity), s.ModRevision)
		if s.ExpiredAt != nil {
			fmt.Fprintf(w, "  expired at %s\n", when(*s.ExpiredAt))
		}
		if a := s.Activity; a != nil {
			what := cell(a.What)
			if a.PartNumber > 0 {
				what += fmt.Sprintf(" part %d", a.PartNumber)
			}
			fmt.Fprintf(w, "  activity key: %s at %s, mod revision %d\n", what, when(a.At), a.ModRevision)
		}
		if s.Uncertain != "" {
			fmt.Fprintf(w, "  uncertain: %s\n", cell(s.Uncertain))
		}
		if s.AbortAttempts > 0 {
			fmt.Fprintf(w, "  abort attempts: %d\n", s.AbortAttempts)
		}
	} else {
		fmt.Fprintln(w, "Session: none (an orphan: nobody known owns the upload)")
	}
	if len(ex.History) > 0 {
		fmt.Fprintf(w, "\nHistory: %d transition(s)\n", len(ex.History))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  AT\tFROM\tTO\tACTOR\tTERM\tREASON")
		for _, t := range ex.History {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", when(t.At), cell(t.From), cell(t.To), cell(t.Actor), termText(t.Term), cell(t.Reason))
		}
		tw.Flush()
	}
	if o := ex.Orphan; o != nil {
		fmt.Fprintf(w, "\nOrphan decision: %s by %s (term %d) at %s, %d part(s), %s; outcome %s\n",
			cell(o.Action), cell(o.Principal), o.Term, when(o.At), o.Parts, sizeText(o.Bytes), cell(o.Outcome))
	}
	writeLastPass(w, ex.LastPass)
	writeNotes(w, ex.Notes)
}

func writeDigestExplanation(w io.Writer, ex *adminapi.DigestExplanation) {
	fmt.Fprintf(w, "Digest %s\n", ex.Digest)
	fmt.Fprintf(w, "Verdict: %s: %s\n", strings.ToUpper(ex.Verdict), ex.Reason)
	fmt.Fprintf(w, "Judged at %s (etcd revision %d) for pass %d; placement grace %s.\n", when(ex.Now), ex.Revision, ex.NextPass, ex.PlacementGrace)
	if b := ex.Blob; b != nil {
		fmt.Fprintf(w, "Blob: %s/%s in namespace %s, %s, stored %s (%s ago)\n", cell(b.Bucket), cell(b.Key), cell(b.Namespace), sizeText(b.Size), when(b.Modified), b.Age)
		for _, o := range ex.Copies[1:] {
			fmt.Fprintf(w, "  another copy: %s/%s in namespace %s, %s, stored %s\n", cell(o.Bucket), cell(o.Key), cell(o.Namespace), sizeText(o.Size), when(o.Modified))
		}
	} else {
		fmt.Fprintln(w, "Blob: not stored")
	}
	writeSteps(w, ex.Steps)

	fmt.Fprintf(w, "\nReferences: %d shown\n", len(ex.References))
	if len(ex.References) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  BUCKET\tKEY\tSOURCE\tAT\tRECORD")
		for _, r := range ex.References {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cell(r.Bucket), cell(r.Key), cell(r.Source), when(r.At), refFlags(r))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "Trash: %d shown\n", len(ex.Trash))
	if len(ex.Trash) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  BUCKET\tKEY\tDELETED AT\tEXPIRES\tDELETED BY")
		for _, t := range ex.Trash {
			expires := when(t.Expires)
			if t.Expired {
				expires += " (expired)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cell(t.Bucket), cell(t.Key), t.DeletedAt.UTC().Format(time.RFC3339Nano), expires, cell(t.Principal))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "Placements: %d shown\n", len(ex.Placements))
	if len(ex.Placements) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ID\tBUCKET\tKEY\tAT\tAGE")
		for _, p := range ex.Placements {
			age := p.Age
			if p.Stale {
				age += " (stale)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cell(p.ID), cell(p.Bucket), cell(p.Key), when(p.At), age)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "Reference revision of shard %s: %d", ex.Shard, ex.ShardRefRevision)
	if ex.ReferenceHolds > 0 {
		fmt.Fprintf(w, "; %d reference hold(s) in place", ex.ReferenceHolds)
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w)
	if t := ex.Tombstone; t != nil {
		fmt.Fprintf(w, "Tombstone: %s since %s, written by pass %d (term %d), attempts %d, frontier %d, ref revision %d, about %s/%s (%s)\n",
			cell(t.State), when(t.Since), t.Pass, t.Term, t.Attempts, t.Frontier, t.RefRev, cell(t.Bucket), cell(t.Key), sizeText(t.Size))
		if t.Reason != "" {
			fmt.Fprintf(w, "  reason: %s\n", cell(t.Reason))
		}
	} else {
		fmt.Fprintln(w, "Tombstone: none")
	}
	switch {
	case len(ex.Planes) == 0:
		fmt.Fprintln(w, "Planes: none configured (digests.planes): no delete waits for a replica or backup")
	case ex.RequiredFrontier == 0:
		fmt.Fprintf(w, "Planes: %d configured; the checklist did not compare them with a frontier\n", len(ex.Planes))
	default:
		fmt.Fprintf(w, "Planes, against the required frontier %d:\n", ex.RequiredFrontier)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  PLANE\tREVISION\tAPPLIED")
		for _, p := range ex.Planes {
			applied := "no"
			if p.Applied {
				applied = "yes"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\n", cell(p.Plane), p.Revision, applied)
		}
		tw.Flush()
	}
	if g := ex.Guard; g != nil {
		fmt.Fprintf(w, "Guard: armed by pass %d (term %d) at %s for %s/%s: writes naming the digest are refused\n",
			g.Pass, g.Term, when(g.At), cell(g.Bucket), cell(g.Key))
	} else {
		fmt.Fprintln(w, "Guard: not armed")
	}
	writeLastPass(w, ex.LastPass)
	writeNotes(w, ex.Notes)
}

// writeSteps prints the checklist: one line per rule tried, the deciding
// one marked, and under each the values it compared.
func writeSteps(w io.Writer, steps []adminapi.Step) {
	fmt.Fprintln(w, "\nChecklist (a pass tries these rules in order and stops at the first that matches):")
	width := 0
	for _, s := range steps {
		width = max(width, len(s.Rule))
	}
	for _, s := range steps {
		mark := "no   "
		if s.Matched {
			mark = "MATCH"
		}
		fmt.Fprintf(w, "  %s  %-*s  %s\n", mark, width, s.Rule, s.Detail)
		if len(s.Values) == 0 {
			continue
		}
		names := make([]string, 0, len(s.Values))
		for k := range s.Values {
			names = append(names, k)
		}
		slices.Sort(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = k + "=" + valueText(s.Values[k])
		}
		fmt.Fprintf(w, "  %s  %*s  %s\n", strings.Repeat(" ", len(mark)), width, "", strings.Join(parts, " "))
	}
}

// valueText renders one compared value: times to the second, as the rest
// of the command line shows them, absent records as "none".
func valueText(v any) string {
	switch v := v.(type) {
	case nil:
		return "none"
	case string:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return when(t)
		}
		return cell(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func refFlags(r adminapi.ExplainRef) string {
	var f []string
	for _, x := range []struct {
		on   bool
		name string
	}{{r.Pending, "write in flight"}, {r.Dirty, "unknown write outcome"}, {r.Restored, "restored from trash"}, {r.Unknown, "written around the gateway"}} {
		if x.on {
			f = append(f, x.name)
		}
	}
	if len(f) == 0 {
		return "-"
	}
	return strings.Join(f, ", ")
}

func termText(term int64) string {
	if term == 0 {
		return "-"
	}
	return strconv.FormatInt(term, 10)
}

func writeLastPass(w io.Writer, p *adminapi.PassSummary) {
	if p == nil {
		fmt.Fprintln(w, "\nLast pass: none recorded yet")
		return
	}
	line := fmt.Sprintf("\nLast pass: %d (term %d), finished %s", p.Pass, p.Term, when(p.Finished))
	if p.DryRun {
		line += ", dry run"
	}
	fmt.Fprintln(w, line)
	for _, x := range []struct{ what, why string }{
		{"refused", p.Refused}, {"stopped", p.Stopped}, {"digest deletions refused", p.DigestsRefused},
		{"digest sweep kept everything", p.DigestsKept}, {"rebuild failed", p.RebuildFailed},
	} {
		if x.why != "" {
			fmt.Fprintf(w, "  %s: %s\n", x.what, x.why)
		}
	}
}

func writeNotes(w io.Writer, notes []string) {
	if len(notes) == 0 {
		return
	}
	fmt.Fprintln(w, "\nNotes:")
	for _, n := range notes {
		fmt.Fprintf(w, "  - %s\n", n)
	}
}
