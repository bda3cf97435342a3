package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/reclaim"
)

// sweepgate reclaim orphans: list, adopt and delete the uploads without a
// session that passes hold for a person.

func (c *Client) reclaimOrphans(ctx context.Context, args []string) int {
	sub := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "list":
		return c.orphansList(ctx, args)
	case "adopt":
		return c.orphansAdopt(ctx, args)
	case "delete":
		return c.orphansDelete(ctx, args)
	case "help":
		c.reclaimHelp(c.Stdout)
		return ExitOK
	}
	return c.usageError("reclaim orphans", fmt.Errorf("unknown subcommand %q: want list, adopt or delete", sub))
}

func (c *Client) orphansList(ctx context.Context, args []string) int {
	const name = "reclaim orphans"
	f, pos, code, ok := c.parseReclaimFlags(name, args, withLimit|withFresh|withShard, adminapi.DefaultOrphansLimit)
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	if f.limit < 1 || f.limit > adminapi.MaxOrphansLimit {
		return c.usageError(name, fmt.Errorf("--limit %d: want 1 to %d", f.limit, adminapi.MaxOrphansLimit))
	}
	q := url.Values{"limit": {strconv.Itoa(f.limit)}}
	timeout := adminClientTimeout
	if f.fresh {
		// A fresh list reads every bucket's uploads.
		q.Set("fresh", "1")
		timeout = 0
	}
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodGet, path: "/admin/v1/reclaim/orphans", query: q, timeout: timeout})
	if code != ExitOK {
		return code
	}
	if status != http.StatusOK {
		return c.apiFailure(name, f.admin+"/admin/v1/reclaim/orphans", status, body)
	}
	var list adminapi.Orphans
	if err := json.Unmarshal(body, &list); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not an orphan list: %v\n", name, f.admin, err)
		return ExitError
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	source := "the backend's uploads listed now"
	if !list.Fresh {
		if list.Pass == 0 {
			fmt.Fprintln(c.Stdout, "No pass report yet; list the backend now with --fresh.")
			return ExitOK
		}
		source = fmt.Sprintf("pass %d, finished %s (--fresh lists the backend now)", list.Pass, when(list.AsOf))
	}
	if list.Total == 0 {
		fmt.Fprintf(c.Stdout, "No orphans, as of %s.\n", source)
		return ExitOK
	}
	fmt.Fprintf(c.Stdout, "%d orphan(s) (uploads without a session: held, never deleted by a pass), as of %s:\n\n", list.Total, source)
	writeOrphans(c.Stdout, list.Orphans)
	if list.Truncated {
		fmt.Fprintf(c.Stderr, "Only %d of %d are listed.\n", len(list.Orphans), list.Total)
	}
	o := list.Orphans[0]
	ref := reclaim.OrphanRef{Bucket: o.Bucket, Key: o.Key, UploadID: o.UploadID}
	fmt.Fprintf(c.Stdout, "\nAdopt one:  sweepgate reclaim orphans adopt --principal OWNER %s\nDelete:     sweepgate reclaim orphans delete --confirm %s\n",
		shellWord(ref.String()), shellWord(ref.String()))
	return ExitOK
}

func writeOrphans(w io.Writer, orphans []adminapi.Orphan) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUCKET\tKEY\tUPLOAD ID\tINITIATED\tPARTS\tBYTES")
	for _, o := range orphans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", cell(o.Bucket), cell(o.Key), cell(o.UploadID), when(o.Initiated), o.Parts, o.Bytes)
	}
	tw.Flush()
}

// parseRefs reads REF arguments.
func (c *Client) parseRefs(name string, pos []string) ([]adminapi.OrphanRef, int, bool) {
	refs := make([]adminapi.OrphanRef, 0, len(pos))
	for _, p := range pos {
		ref, err := reclaim.ParseOrphanRef(p)
		if err != nil {
			return nil, c.usageError(name, fmt.Errorf("%q: want BUCKET/KEY?uploadId=ID, as 'sweepgate reclaim orphans' prints it", p)), false
		}
		refs = append(refs, adminapi.OrphanRef{Bucket: ref.Bucket, Key: ref.Key, UploadID: ref.UploadID})
	}
	return refs, ExitOK, true
}

func (c *Client) orphansAdopt(ctx context.Context, args []string) int {
	const name = "reclaim orphans adopt"
	f, pos, code, ok := c.parseReclaimFlags(name, args, withPrincipal, 0)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return c.usageError(name, fmt.Errorf("want one REF (BUCKET/KEY?uploadId=ID), got %d argument(s)", len(pos)))
	}
	if f.principal == "" {
		return c.usageError(name, errors.New("--principal is required: the principal that owns the upload from now on"))
	}
	refs, code, ok := c.parseRefs(name, pos)
	if !ok {
		return code
	}
	req := adminapi.AdoptRequest{Bucket: refs[0].Bucket, Key: refs[0].Key, UploadID: refs[0].UploadID, Principal: f.principal}
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodPost, path: "/admin/v1/reclaim/orphans/adopt", body: req, timeout: adminClientTimeout})
	if code != ExitOK {
		return code
	}
	if status != http.StatusOK {
		return c.apiFailure(name, f.admin+"/admin/v1/reclaim/orphans/adopt", status, body)
	}
	var ans adminapi.Adopted
	if err := json.Unmarshal(body, &ans); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not an adoption: %v\n", name, f.admin, err)
		return ExitError
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	a := ans.Adopted
	fmt.Fprintf(c.Stdout, "Adopted %s: %d part(s), %s, now owned by %s (term %d, at %s).\nIt follows the normal grace period from now on.\n",
		reclaim.OrphanRef{Bucket: a.Bucket, Key: a.Key, UploadID: a.UploadID}, a.Parts, sizeText(a.Bytes), cell(a.Principal), a.Term, when(a.At))
	return ExitOK
}

func (c *Client) orphansDelete(ctx context.Context, args []string) int {
	const name = "reclaim orphans delete"
	f, pos, code, ok := c.parseReclaimFlags(name, args, withPrincipal|withConfirm, 0)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return c.usageError(name, errors.New("name the uploads to delete: REF... (BUCKET/KEY?uploadId=ID)"))
	}
	if len(pos) > adminapi.MaxOrphanRefs {
		return c.usageError(name, fmt.Errorf("at most %d uploads at once, got %d", adminapi.MaxOrphanRefs, len(pos)))
	}
	refs, code, ok := c.parseRefs(name, pos)
	if !ok {
		return code
	}
	if f.principal == "" {
		f.principal = envValue(c.Environ, "USER")
	}
	req := adminapi.DeleteRequest{Refs: refs, Confirm: f.confirm, Principal: f.principal}
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodPost, path: "/admin/v1/reclaim/orphans/delete", body: req})
	if code != ExitOK {
		return code
	}
	var ans adminapi.OrphanDeletion
	if err := json.Unmarshal(body, &ans); err != nil || ans.Results == nil {
		return c.apiFailure(name, f.admin+"/admin/v1/reclaim/orphans/delete", status, body)
	}
	if f.json {
		if code := c.writeIndented(name, body); code != ExitOK {
			return code
		}
	} else {
		tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BUCKET\tKEY\tUPLOAD ID\tPARTS\tBYTES\tOUTCOME")
		for _, r := range ans.Results {
			outcome := r.Outcome
			if r.Uncertain != "" {
				outcome += " (uncertain: " + r.Uncertain + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", cell(r.Bucket), cell(r.Key), cell(r.UploadID), r.Parts, r.Bytes, cell(outcome))
		}
		tw.Flush()
	}
	switch {
	case ans.Error != nil && ans.Error.Code == adminapi.CodeNotConfirmed:
		fmt.Fprintf(c.Stderr, "Nothing was deleted. Run again with --confirm to delete %s.\n", plural(len(refs), "this upload", "these uploads"))
		return ExitRefused
	case ans.Error != nil:
		fmt.Fprintf(c.Stderr, "sweepgate %s: %s\n", name, ans.Error.Message)
		return ExitError
	case ans.Deleted == len(refs):
		fmt.Fprintf(c.Stdout, "Deleted %d of %d.\n", ans.Deleted, len(refs))
		return ExitOK
	}
	fmt.Fprintf(c.Stdout, "Deleted %d of %d; the outcome says why the others were not.\n", ans.Deleted, len(refs))
	for _, r := range ans.Results {
		if !r.Deleted && r.Outcome != reclaim.ErrNoSuchUpload.Error() {
			return ExitRefused
		}
	}
	return ExitNotFound
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
