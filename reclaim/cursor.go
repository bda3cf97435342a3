package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// uploadSweep names the upload sweep's cursor (etcdstore.Keys.Cursor).
const uploadSweep = "uploads"

// The phases of a pass, as recorded in its cursor.
const (
	phaseInventory = "inventory"
	phaseAct       = "act"
)

// cursorVersion is the version of the cursor record's layout.
const cursorVersion = 1

// The record kinds of the upload sweep's own records: its cursor, the
// chunks of its plan and its pass reports.
var (
	cursorRecord = etcdstore.RecordKind{Name: "upload sweep cursor", Version: cursorVersion}
	chunkRecord  = etcdstore.RecordKind{Name: "plan chunk", Version: cursorVersion}
	reportRecord = etcdstore.RecordKind{Name: "pass report", Version: 1}
)

// cursor is the durable state of the pass in progress, written (fenced)
// after every page of the inventory and every action, so that a pass cut
// short by a crash, a lost term or a failed read is resumed by the next
// leader instead of started over.
//
// Resume semantics, which keep every upload accounted for exactly once:
//
//   - A pass keeps its number, its decision clock (Now) and the etcd
//     revision it reads sessions at (Rev) for its whole life, across
//     resumes: a resumed pass decides exactly as the original would have.
//     If Rev has been compacted meanwhile, the pass is abandoned (its
//     report says so) and the next one starts over.
//   - Inventory: buckets are visited in name order. Pos says where the next
//     listing page starts: buckets before Pos.Bucket are done; in
//     Pos.Bucket the next page starts after (KeyMarker, UploadIDMarker),
//     the markers the backend itself returned for the page before, so a
//     resume asks exactly the question the interrupted pass would have
//     asked next. A page's decisions go to plan chunks, and the cursor
//     (position, chunk count, tallies) advances in the same transaction as
//     the page's last chunk, so a page is counted entirely or not at all.
//     A chunk written past Chunks by an interrupted page is overwritten.
//     Uploads created after the pass began may or may not be listed; a
//     listed one whose session is newer than Rev is kept, not held.
//   - After a bucket is listed, its live sessions whose upload was not
//     listed are looked up: gone is reported missing; present (a backend
//     whose listing is incomplete, as MinIO's after a restart) is judged
//     like a listed upload, except in a bucket the pass resumed into,
//     where it cannot be told from an upload listed before the
//     interruption and is left to the next pass rather than counted twice.
//   - Act: marks and deletes run in plan order; Act points at the next
//     entry and advances in the same transaction as the action it follows,
//     so no action is done twice or skipped. A delete interrupted after
//     its "aborting" was recorded is finished by the reconciler at the
//     start of the next pass (intent before side effect).
//   - The report, the removal of the cursor and of the plan chunks are one
//     transaction: a pass either has a cursor or a final report.
type cursor struct {
	Version int       `json:"v"`
	Pass    int64     `json:"pass"`
	Term    int64     `json:"term"`
	Started time.Time `json:"started"`
	Now     time.Time `json:"now"`
	// Elapsed is the elapsed clock at the pass's start, kept like Now.
	Elapsed time.Duration `json:"elapsed,omitempty"`
	Rev     int64         `json:"rev"`
	Phase   string        `json:"phase"`
	Pos     position      `json:"pos"`
	// Chunks is how many plan chunks the inventory has committed.
	Chunks  int     `json:"chunks"`
	Act     actPos  `json:"act"`
	Tally   tally   `json:"tally"`
	Acted   Acted   `json:"acted"`
	Breaker Breaker `json:"breaker"`
	Resumed int     `json:"resumed,omitempty"`
	// Slice is a bounded pass's part of the keyspace (see slice); nil
	// for an unbounded pass.
	Slice *slice `json:"slice,omitempty"`
}

// position is where the inventory stands (see cursor).
type position struct {
	Bucket         string `json:"bucket,omitempty"`
	KeyMarker      string `json:"key_marker,omitempty"`
	UploadIDMarker string `json:"upload_id_marker,omitempty"`
	// AfterKey and AfterID: a bounded pass stopped in Bucket after this
	// upload, in (key, upload id) order, on a backend that answers with
	// more uploads than asked (see inventory.within).
	AfterKey string `json:"after_key,omitempty"`
	AfterID  string `json:"after_id,omitempty"`
	// Listed: Bucket's uploads are all listed; its sessions without an
	// upload are still to be found.
	Listed bool `json:"listed,omitempty"`
	// BucketDone: Bucket is finished.
	BucketDone bool `json:"bucket_done,omitempty"`
	// Finished: every bucket, and the sessions of buckets the backend does
	// not have, are done.
	Finished bool `json:"finished,omitempty"`
}

// actPos is the next plan entry to act on.
type actPos struct {
	Chunk int `json:"chunk"`
	Index int `json:"index"`
}

// tally is what the inventory counted so far.
type tally struct {
	Uploads  Uploads    `json:"uploads"`
	Vanished int64      `json:"vanished,omitempty"`
	Totals   ListTotals `json:"totals"`
	// MissingChecks counts the backend checks spent on sessions without a
	// listed upload, against the pass's budget.
	MissingChecks int64 `json:"missing_checks,omitempty"`
	// Listed counts the uploads the backend's listing returned (a bounded
	// pass's budget counts them).
	Listed int64 `json:"listed,omitempty"`
	// Denied are the buckets the backend refused to list (AccessDenied).
	Denied []string `json:"denied,omitempty"`
}

func (t *tally) plus(o tally) {
	t.Uploads.plus(o.Uploads)
	t.Vanished += o.Vanished
	t.Totals.Stuck += o.Totals.Stuck
	t.Totals.Orphans += o.Totals.Orphans
	t.Totals.Missing += o.Totals.Missing
	t.Totals.MissingUnverified += o.Totals.MissingUnverified
	t.Totals.Unlisted += o.Totals.Unlisted
	t.MissingChecks += o.MissingChecks
	t.Listed += o.Listed
	t.Denied = append(t.Denied, o.Denied...)
}

// chunk is one piece of a pass's plan: the actions it decided (marks and
// deletes, with the revisions they were decided from) and the entries of
// the report's lists, for one page of the inventory or less.
type chunk struct {
	// Version is the layout's version; version 1 is stored without it.
	Version int       `json:"v,omitempty"`
	Acts    []planned `json:"acts,omitempty"`
	Orphans []Orphan  `json:"orphans,omitempty"`
	Stuck   []Stuck   `json:"stuck,omitempty"`
	Missing []Missing `json:"missing,omitempty"`
}

// planned is one mark or delete, with what it was decided from: the
// session's and the activity key's mod revisions at the pass's revision
// (0: no activity key), which the action's transaction compares.
type planned struct {
	Verdict     Verdict `json:"v"`
	Bucket      string  `json:"b"`
	Key         string  `json:"k"`
	UploadID    string  `json:"u"`
	SessionRev  int64   `json:"sr"`
	ActivityRev int64   `json:"ar,omitempty"`
	Parts       int     `json:"p"`
	Bytes       int64   `json:"n"`
	Reason      string  `json:"r,omitempty"`
	// LastActivity is the recorded activity the decision saw, which a part
	// on the backend is compared with right before the action.
	LastActivity time.Time `json:"la,omitzero"`
}

// chunkBytes bounds an encoded chunk, well inside etcd's request limit.
const chunkBytes = 512 << 10

func (c *chunk) empty() bool {
	return len(c.Acts) == 0 && len(c.Orphans) == 0 && len(c.Stuck) == 0 && len(c.Missing) == 0
}

// loadCursor reads the cursor of the pass in progress; ok is false when
// no pass is in progress.
func loadCursor(ctx context.Context, store *etcdstore.Store) (c cursor, rev int64, ok bool, err error) {
	resp, err := store.Client().Get(ctx, store.Keys().Cursor(uploadSweep))
	if err != nil {
		return cursor{}, 0, false, fmt.Errorf("reclaim: read cursor: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return cursor{}, resp.Header.Revision, false, nil
	}
	if err := etcdstore.DecodeKV(cursorRecord, resp.Kvs[0], &c); err != nil {
		return cursor{}, 0, false, fmt.Errorf("reclaim: %w", err)
	}
	return c, resp.Header.Revision, true, nil
}

// cursorOp is the write that records c.
func cursorOp(keys etcdstore.Keys, c *cursor) clientv3.Op {
	c.Version = cursorVersion
	b, _ := json.Marshal(c) // plain data always marshals
	return clientv3.OpPut(keys.Cursor(uploadSweep), string(b))
}

// loadChunk reads chunk i of pass n. A chunk that was never written (an
// empty page) reads as empty.
func loadChunk(ctx context.Context, store *etcdstore.Store, n int64, i int) (chunk, error) {
	resp, err := store.Client().Get(ctx, store.Keys().PlanChunk(n, i))
	if err != nil {
		return chunk{}, fmt.Errorf("reclaim: read plan chunk %d: %w", i, err)
	}
	if len(resp.Kvs) == 0 {
		return chunk{}, errors.New("reclaim: plan chunk " + fmt.Sprint(i) + " is missing")
	}
	var c chunk
	if err := etcdstore.DecodeKV(chunkRecord, resp.Kvs[0], &c); err != nil {
		return chunk{}, fmt.Errorf("reclaim: %w", err)
	}
	return c, nil
}

// splitChunks cuts a page's decisions into chunks that each encode within
// chunkBytes.
func splitChunks(c chunk) ([][]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if len(b) <= chunkBytes {
		return [][]byte{b}, nil
	}
	n := len(c.Acts) + len(c.Orphans) + len(c.Stuck) + len(c.Missing)
	if n <= 1 {
		return nil, fmt.Errorf("reclaim: one plan entry encodes to %d bytes", len(b))
	}
	var a, z chunk
	half := func(n int) int { return n / 2 }
	a.Acts, z.Acts = c.Acts[:half(len(c.Acts))], c.Acts[half(len(c.Acts)):]
	a.Orphans, z.Orphans = c.Orphans[:half(len(c.Orphans))], c.Orphans[half(len(c.Orphans)):]
	a.Stuck, z.Stuck = c.Stuck[:half(len(c.Stuck))], c.Stuck[half(len(c.Stuck)):]
	a.Missing, z.Missing = c.Missing[:half(len(c.Missing))], c.Missing[half(len(c.Missing)):]
	if a.empty() {
		// Only single-entry lists: move one list whole to the first half.
		switch {
		case len(z.Acts) > 0:
			a.Acts, z.Acts = z.Acts, nil
		case len(z.Orphans) > 0:
			a.Orphans, z.Orphans = z.Orphans, nil
		case len(z.Stuck) > 0:
			a.Stuck, z.Stuck = z.Stuck, nil
		}
	}
	first, err := splitChunks(a)
	if err != nil {
		return nil, err
	}
	rest, err := splitChunks(z)
	if err != nil {
		return nil, err
	}
	return append(first, rest...), nil
}
