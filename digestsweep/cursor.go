package digestsweep

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// CursorName names the digest sweep's cursor (etcdstore.Keys.Cursor),
// which the pass framework removes with the pass it belongs to;
// rebuildStateName the record of the last complete rebuild, which outlives
// passes.
const (
	CursorName       = "digests"
	rebuildStateName = "rebuild"
)

// sweepCursorVersion is the version of the layout of the digest sweep's
// records (its cursor, the last rebuild).
const sweepCursorVersion = 1

// The record kinds of the digest sweep's own records.
var (
	digestCursorRecord = etcdstore.RecordKind{Name: "digest sweep cursor", Version: sweepCursorVersion}
	lastRebuildRecord  = etcdstore.RecordKind{Name: "last rebuild", Version: sweepCursorVersion}
)

// The phases of the digest sweep, as recorded in its cursor.
const (
	digestPhaseRebuild    = "rebuild"
	digestPhaseTombstones = "tombstones"
	digestPhaseCollect    = "collect"
	digestPhasePrune      = "prune"
)

// digestCursor is the durable state of the digest sweep of the pass in
// progress, written (fenced) after every page and batch.
//
// Resume semantics:
//   - The sweep belongs to the pass numbered Pass; a cursor of another pass
//     (one abandoned or finished without its digest sweep) is dropped.
//   - rebuild: Rebuild.Pos is where the rebuild stands; its result so far
//     is kept with it.
//   - tombstones: Rev is the revision the retained set is read at and
//     Shards the reference revision of every shard at Rev; both hold for
//     the whole pass. Namespaces are walked in configuration order; NS is
//     the one in progress and After the last key of the last page whose
//     tombstones were written. A page re-listed after a resume is judged
//     again; its tombstones already written in this pass are recognised
//     (their Pass) and counted as they stand, not advanced twice.
//   - collect: Collect is the last tombstone key whose batch is settled.
//     Guards armed by an interrupted batch are settled by the next
//     attempt's first step, from what the backend holds.
//   - prune starts over on a resume; what was pruned is gone.
type digestCursor struct {
	Version int              `json:"v"`
	Pass    int64            `json:"pass"`
	Term    int64            `json:"term"`
	Phase   string           `json:"phase"`
	Rebuild rebuildState     `json:"rebuild"`
	Rev     int64            `json:"rev,omitempty"`
	Shards  map[string]int64 `json:"shards,omitempty"`
	NS      int              `json:"ns"`
	After   string           `json:"after,omitempty"`
	Collect string           `json:"collect,omitempty"`
	Report  Report           `json:"report"`
	// Slice is a bounded sweep's part of the namespaces (see slice.go);
	// nil for an unbounded one.
	Slice *digestSlice `json:"slice,omitempty"`
}

// rebuildState is the rebuild's part of the cursor. Started is the etcd
// revision the rebuild in progress started at, kept across a resume (its
// pages done before the resume were read after it too). Proof is the
// revision the last complete rebuild started at (math.MaxInt64 with no
// reference source to read): the judgement lets a tombstone advance only
// when its latest decision is older (rebuildOrder).
type rebuildState struct {
	Due     bool          `json:"due"`
	Pos     RebuildPos    `json:"pos"`
	Result  RebuildResult `json:"result"`
	Started int64         `json:"started,omitempty"`
	Proof   int64         `json:"proof,omitempty"`
	// Denied names the sources of the rebuild in progress that the
	// backend refused (AccessDenied): a rebuild with any is not complete.
	Denied []string `json:"denied,omitempty"`
}

// lastRebuild is the record of the last complete rebuild; Started is the
// etcd revision it started at (0 in a record written before it was kept:
// no tombstone advances until the next rebuild).
type lastRebuild struct {
	Version  int           `json:"v"`
	Pass     int64         `json:"pass"`
	Started  int64         `json:"started,omitempty"`
	Finished time.Time     `json:"finished"`
	Result   RebuildResult `json:"result"`
	// Layout is the fingerprint of the layout the rebuild read the
	// sources of (cas.Layout.Fingerprint): under another layout its
	// picture proves nothing, and a rebuild is due before any deletion.
	Layout string `json:"layout,omitempty"`
}

// loadSweepCursor reads the digest sweep's cursor; ok is false when there
// is none.
func loadSweepCursor(ctx context.Context, store *etcdstore.Store) (c digestCursor, ok bool, err error) {
	resp, err := store.Client().Get(ctx, store.Keys().Cursor(CursorName))
	if err != nil {
		return c, false, fmt.Errorf("digestsweep: read digest cursor: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return c, false, nil
	}
	if err := etcdstore.DecodeKV(digestCursorRecord, resp.Kvs[0], &c); err != nil {
		return digestCursor{}, false, fmt.Errorf("digestsweep: the digest cursor: %w", err)
	}
	return c, true, nil
}

// cursorOp is the write that records the sweep's cursor as it stands.
func (s *digestSweep) cursorOp() clientv3.Op { return cursorOpOf(s.keys(), &s.cur) }

// cursorOpOf is the write that records c.
func cursorOpOf(keys etcdstore.Keys, c *digestCursor) clientv3.Op {
	c.Version = sweepCursorVersion
	b, _ := json.Marshal(c) // plain data always marshals
	return clientv3.OpPut(keys.Cursor(CursorName), string(b))
}

// save records the cursor (fenced). A dry run keeps it in memory.
func (s *digestSweep) save(ctx context.Context, ops ...clientv3.Op) error {
	if s.dry {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := sweep.FencedTxn(ctx, s.cli(), s.term, nil, append(ops, s.cursorOp())...)
	return err
}

// Progress is how far the digest sweep of a pass in progress got: its
// phase and its counts so far.
type Progress struct {
	Phase  string `json:"phase"`
	Report Report `json:"report"`
}

// ReadProgress reads how far the digest sweep of pass got from its cursor;
// nil when the sweep of pass has not started (or the pass has none).
func ReadProgress(ctx context.Context, store *etcdstore.Store, pass int64) (*Progress, error) {
	c, ok, err := loadSweepCursor(ctx, store)
	if err != nil || !ok || c.Pass != pass {
		return nil, err
	}
	return &Progress{Phase: c.Phase, Report: c.Report}, nil
}
