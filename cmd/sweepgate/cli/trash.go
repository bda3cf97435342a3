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
)

func (c *Client) trashHelp(w io.Writer) {
	fmt.Fprintf(w, `Usage: sweepgate trash list [--bucket B] [--key K] [--limit N] [--json]
       sweepgate trash restore [--at DELETED_AT] [--json] BUCKET KEY

Lists and restores the trash of a running sweepgate through its admin API
(/admin/v1/trash, see docs/admin-api.md). When a reference object (a
manifest, a link or pointer file in a reference source) is deleted, the
digests it named move to the trash and stay retained for
digests.trash_window: the blobs they name are not reclaimed while the
trash holds them, and a restore makes them referenced again.

  list     one line per trash record: bucket, key, when the object was
           deleted (the record's name), when its trash expires, how many
           digests it names and who deleted it; oldest first per object
  restore  record the digests of one deleted object as referenced again,
           as if the object still named them (until it is written again).
           Without --at, the object's newest trash record is restored.

Flags:
%s  --json             print the API's JSON document instead of a table
  --bucket B         list: only the trash of bucket B
  --key K            list: only the trash of object K (needs --bucket)
  --limit N          list: at most N records (1 to %d, default %d)
  --at DELETED_AT    restore: the record to restore, its deleted-at time
                     exactly as 'trash list' prints it (RFC 3339 with
                     nanoseconds)

A trash record past its expiry can still be restored until it is pruned,
but the blobs only it named may have been reclaimed by then.

Examples:
  sweepgate trash list
  sweepgate trash list --bucket registry --key manifests/app/v1.json
  sweepgate trash restore registry manifests/app/v1.json
  sweepgate trash restore --at 2030-05-06T07:00:00.123456789Z registry manifests/app/v1.json
  sweepgate trash list --json | jq -r '.trash[] | select(.expired | not) | .key'

Exit status: 0 done, 1 error (admin API unreachable, etcd unavailable, the
restore was refused because a digest's bytes are being deleted or a write
of the object is in flight), 2 bad command line, 3 no such trash record,
5 the admin API refused the request for want of the right admin token.
`, adminFlagsHelp(21), adminapi.MaxTrashLimit, adminapi.DefaultTrashLimit)
}

func (c *Client) trashCmd(ctx context.Context, args []string) int {
	return c.runSubcommand(ctx, "trash", c.trashHelp, args,
		subcommand{"list", c.trashList}, subcommand{"restore", c.trashRestore})
}

func (c *Client) trashList(ctx context.Context, args []string) int {
	const name = "trash list"
	var bucket, key string
	limit := adminapi.DefaultTrashLimit
	f, pos, code, ok := c.parseAdminFlags(name, args, (*Client).trashHelp, func(fs *flag.FlagSet) {
		fs.StringVar(&bucket, "bucket", "", "")
		fs.StringVar(&key, "key", "", "")
		fs.IntVar(&limit, "limit", adminapi.DefaultTrashLimit, "")
	})
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	if key != "" && bucket == "" {
		return c.usageError(name, errors.New("--key needs --bucket"))
	}
	if limit < 1 || limit > adminapi.MaxTrashLimit {
		return c.usageError(name, fmt.Errorf("--limit %d: want 1 to %d", limit, adminapi.MaxTrashLimit))
	}
	list, body, code := c.getTrash(ctx, name, f.admin, bucket, key, limit)
	if code != ExitOK {
		return code
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	if len(list.Trash) == 0 {
		if bucket != "" {
			fmt.Fprintln(c.Stdout, "No trash record matches.")
		} else {
			fmt.Fprintln(c.Stdout, "The trash is empty.")
		}
		return ExitOK
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUCKET\tKEY\tDELETED AT\tEXPIRES\tDIGESTS\tDELETED BY")
	for _, t := range list.Trash {
		expires := when(t.Expires)
		if t.Expired {
			expires += " (expired)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", cell(t.Bucket), cell(t.Key), deletedAt(t.DeletedAt), expires, len(t.Digests), cell(t.Principal))
	}
	tw.Flush()
	if list.Truncated {
		fmt.Fprintf(c.Stderr, "More trash records match than the %d shown; narrow with --bucket and --key, or raise --limit.\n", len(list.Trash))
	}
	t := list.Trash[len(list.Trash)-1]
	fmt.Fprintf(c.Stdout, "\nRestore one: sweepgate trash restore --at %s %s %s\n", deletedAt(t.DeletedAt), shellWord(t.Bucket), shellWord(t.Key))
	return ExitOK
}

// deletedAt writes a trash record's name as --at takes it back: every
// nanosecond counts, since the record's key holds them.
func deletedAt(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// getTrash reads the trash through the admin API.
func (c *Client) getTrash(ctx context.Context, name, base, bucket, key string, limit int) (adminapi.TrashList, []byte, int) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if bucket != "" {
		q.Set("bucket", bucket)
	}
	if key != "" {
		q.Set("key", key)
	}
	body, code := c.adminGet(ctx, name, base, "/admin/v1/trash", q)
	if code != ExitOK {
		return adminapi.TrashList{}, nil, code
	}
	var list adminapi.TrashList
	if err := json.Unmarshal(body, &list); err != nil || list.Trash == nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not a trash list: %s\n", name, base, snippet(body, err))
		return adminapi.TrashList{}, nil, ExitError
	}
	return list, body, ExitOK
}

func (c *Client) trashRestore(ctx context.Context, args []string) int {
	const name = "trash restore"
	var at string
	f, pos, code, ok := c.parseAdminFlags(name, args, (*Client).trashHelp, func(fs *flag.FlagSet) {
		fs.StringVar(&at, "at", "", "")
	})
	if !ok {
		return code
	}
	if len(pos) != 2 || pos[0] == "" || pos[1] == "" {
		return c.usageError(name, fmt.Errorf("want BUCKET and KEY, got %d argument(s)", len(pos)))
	}
	bucket, key := pos[0], pos[1]
	var deleted time.Time
	if at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return c.usageError(name, fmt.Errorf("--at %q: want the deleted-at time as 'trash list' prints it, such as 2030-05-06T07:00:00.123456789Z", at))
		}
		deleted = t
	} else {
		// The newest record: records of one object come oldest first, and
		// one object seldom has many, so the largest page holds them all.
		list, _, code := c.getTrash(ctx, name, f.admin, bucket, key, adminapi.MaxTrashLimit)
		if code != ExitOK {
			return code
		}
		switch {
		case len(list.Trash) == 0:
			fmt.Fprintf(c.Stderr, "sweepgate %s: no trash record of %s in bucket %s\n", name, strconv.Quote(key), strconv.Quote(bucket))
			return ExitNotFound
		case list.Truncated:
			fmt.Fprintf(c.Stderr, "sweepgate %s: %s/%s has more than %d trash records, so the newest is not known; name one with --at (see 'sweepgate trash list --bucket B --key K')\n", name, bucket, key, adminapi.MaxTrashLimit)
			return ExitError
		}
		deleted = list.Trash[len(list.Trash)-1].DeletedAt
	}
	req := adminapi.RestoreRequest{Bucket: bucket, Key: key, DeletedAt: &deleted}
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodPost, path: "/admin/v1/trash/restore", body: req, timeout: adminClientTimeout})
	if code != ExitOK {
		return code
	}
	if status != http.StatusOK {
		return c.apiFailure(name, f.admin+"/admin/v1/trash/restore", status, body)
	}
	var ans adminapi.Restored
	if err := json.Unmarshal(body, &ans); err != nil || ans.Restored.Bucket == "" {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not a restore: %s\n", name, f.admin, snippet(body, err))
		return ExitError
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	r := ans.Restored
	fmt.Fprintf(c.Stdout, "Restored %s/%s (deleted at %s): its %d digest(s) are referenced again.\n",
		cell(r.Bucket), cell(r.Key), deletedAt(r.DeletedAt), len(r.Digests))
	for _, d := range r.Digests {
		fmt.Fprintf(c.Stdout, "  %s\n", d)
	}
	if r.Expired {
		fmt.Fprintf(c.Stdout, "Its trash had expired at %s: a blob that only it named may have been reclaimed already; check that the blobs exist.\n", when(r.Expires))
	}
	return ExitOK
}
