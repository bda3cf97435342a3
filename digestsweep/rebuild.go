package digestsweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/sweep"
)

// The rebuild compares the reference objects the backend holds with the
// references the gateway recorded. The gateway records every write it
// sees, so what the rebuild adds comes from a producer writing around it
// (or a body whose write outcome the gateway never learnt); such
// references are retained and alerted on, never reclaimed.
//
// The rebuild only adds and settles. A record whose object is no longer on
// the backend is left alone: keeping its digests retains more than needed,
// which is safe, whereas dropping it on a listing that missed the object
// would delete bytes still referenced.
//
// An object written around the gateway after the scan passed its key is
// found by the next rebuild; until then the placement grace retains young
// blobs.

const (
	// rebuildParallel is how many objects of a page are compared at once:
	// enough to hide the latency of a body read, small enough not to crowd
	// the backend out for clients.
	rebuildParallel = 8
	// defaultRebuildBatch is the listing page size when none is set: the
	// most S3 lists at once.
	defaultRebuildBatch = 1000
)

// RebuildResult is what one rebuild of the recorded references found.
type RebuildResult struct {
	Objects     int64 `json:"objects"`      // reference objects listed on the backend
	Read        int64 `json:"read"`         // bodies read (no record, ETag differs, or dirty)
	Unknown     int64 `json:"unknown"`      // objects whose references the gateway had not recorded: a producer writing around it
	UnknownRefs int64 `json:"unknown_refs"` // references added for them
	Settled     int64 `json:"settled"`      // dirty records settled by reading the body
	Stale       int64 `json:"stale"`        // pending writes older than the stale limit turned into dirty records
}

func (r *RebuildResult) add(o RebuildResult) {
	r.Objects += o.Objects
	r.Read += o.Read
	r.Unknown += o.Unknown
	r.UnknownRefs += o.UnknownRefs
	r.Settled += o.Settled
	r.Stale += o.Stale
}

// RebuildPos is where a rebuild stopped: the source index and the last key
// done. Source equal to the number of sources means the rebuild finished.
type RebuildPos struct {
	Source int    `json:"source"`
	After  string `json:"after,omitempty"`
}

// Rebuilder scans the reference sources on the backend and brings the
// recorded references up to what the bodies name. The sweep runs one when
// it is due; it also runs on its own, without a pass around it.
type Rebuilder struct {
	Backend Backend
	Store   *etcdstore.Store
	Sources []cas.Source
	Batch   int           // keys per listing page (<= 1000)
	Stale   time.Duration // a pending write older than this is from a gateway that died: made dirty (default 1h)
	Logger  *slog.Logger  // nil discards
	Now     func() time.Time
	// Denied, when set, is told of each source whose listing or reads the
	// backend refuses (AccessDenied), and the rebuild goes on with the
	// next source; when nil, such a refusal is an error like any other.
	Denied func(src *cas.Source, err error)
}

// Run scans every reference source on the backend from pos, one page at a
// time, and compares each object with its record: an object the gateway
// did not record, or whose body differs from the recorded one, is read and
// its references added (and alerted on); a dirty record is settled to the
// body's digests; a pending write older than the stale limit is made dirty
// for the next rebuild to settle. After each page it calls save(next
// position, result so far) so a killed pass resumes there; the position
// after the last page is {Source: len(sources)}. It returns the first
// error, and the caller then deletes nothing this pass: a reference the
// rebuild could not check may be the only one to a blob.
//
// On an error the result includes the objects of the failed page that were
// done; their records now match the backend, so a rebuild resumed with
// that result does not count them again.
//
// With b.Denied set, a source whose listing or reads the backend refuses
// (AccessDenied) is not an error: b.Denied is told, the rest of the source
// is skipped and the rebuild goes on with the next; the caller must not
// take such a rebuild as complete.
func (b *Rebuilder) Run(ctx context.Context, pos RebuildPos, res RebuildResult, save func(RebuildPos, RebuildResult) error) (RebuildResult, error) {
	batch := b.Batch
	if batch <= 0 || batch > defaultRebuildBatch {
		batch = defaultRebuildBatch
	}
	// cont continues the listing of the source at pos (ListObjectsNext)
	// once its first page is read.
	var cont *s3client.ObjectPage
	for pos.Source < len(b.Sources) {
		src := &b.Sources[pos.Source]
		page, err := b.list(ctx, src, pos, cont, batch)
		if errors.Is(err, s3client.ErrNoSuchBucket) {
			// No bucket holds no reference objects, so nothing is missing
			// from the records; those recorded for it stay (see above).
			b.logger().Warn("rebuild: the bucket of a reference source does not exist", "source", src.Name, "bucket", src.Bucket)
			page = keyPage{ObjectPage: s3client.ObjectPage{Done: true}}
		} else if err == nil {
			err = b.page(ctx, src, page.keys, &res)
		}
		next := RebuildPos{Source: pos.Source, After: page.Next}
		switch {
		case isDenied(err) && b.Denied != nil:
			b.Denied(src, err)
			next = RebuildPos{Source: pos.Source + 1}
		case err != nil:
			return res, fmt.Errorf("rebuild: source %s: %w", src.Name, err)
		case page.Done:
			next = RebuildPos{Source: pos.Source + 1}
		}
		if save != nil {
			if err := save(next, res); err != nil {
				return res, fmt.Errorf("rebuild: save position: %w", err)
			}
		}
		cont = nil
		if next.Source == pos.Source {
			cont = &page.ObjectPage
		}
		pos = next
	}
	return res, nil
}

// page compares the objects of one listing page with their records, a few
// at a time, adding what each found to res. Any failure fails the page.
func (b *Rebuilder) page(ctx context.Context, src *cas.Source, objects []digests.ListedKey, res *RebuildResult) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs = make([]error, len(objects))
		sem  = make(chan struct{}, rebuildParallel)
		// check compares each object with its record, as the Service
		// does for one versioned key after a delete.
		check = &digests.RecordChecker{Backend: b.Backend, Store: b.Store, Stale: b.Stale, Logger: b.Logger, Now: b.Now}
	)
	for i, o := range objects {
		if !src.Contains(o.Key) {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d, err := check.Check(ctx, src, o)
			if err != nil {
				errs[i] = err
				cancel()
				return
			}
			mu.Lock()
			res.add(RebuildResult{Objects: 1, Read: d.Read, Unknown: d.Unknown, UnknownRefs: d.UnknownRefs, Settled: d.Settled, Stale: d.Stale})
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Report the first cause rather than the cancellations it caused.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errors.Join(errs...)
}

func (b *Rebuilder) logger() *slog.Logger {
	if b.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Logger
}

// due.
func (s *digestSweep) rebuildDue(ctx context.Context) (bool, lastRebuild, error) {
	last, ok, err := s.lastRebuild(ctx)
	if err != nil {
		return false, last, err
	}
	if ok && last.Layout != s.cfg.Layout.Fingerprint() {
		// The last rebuild read another layout's sources: nothing it saw
		// proves a verdict under this one.
		s.log.Warn("the layout changed since the last rebuild: a rebuild is due, and no blob advances until it completes", "last_layout", last.Layout, "layout", s.cfg.Layout.Fingerprint())
		last.Started = 0
		return true, last, nil
	}
	return s.rebuildDueAt(last, ok, s.now), last, nil
}

// rebuildDueAt says whether a rebuild is due at now after last (ok false:
// none was ever completed).
func (s *digestSweep) rebuildDueAt(last lastRebuild, ok bool, now time.Time) bool {
	return !ok || s.cfg.RebuildInterval == 0 || now.Sub(last.Finished) >= s.cfg.RebuildInterval
}

func (s *digestSweep) lastRebuild(ctx context.Context) (lastRebuild, bool, error) {
	var l lastRebuild
	resp, err := s.cli().Get(ctx, s.keys().Cursor(rebuildStateName))
	if err != nil {
		return l, false, fmt.Errorf("digestsweep: read the last rebuild: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return l, false, nil
	}
	if err := etcdstore.DecodeKV(lastRebuildRecord, resp.Kvs[0], &l); err != nil {
		return l, false, fmt.Errorf("digestsweep: the last rebuild: %w", err)
	}
	return l, true, nil
}

// rebuild runs (or resumes) the rebuild when it is due. A failed rebuild
// does not stop the pass: the sweep goes on to judge and mark, but writes
// no ready tombstone and deletes nothing, since a reference the rebuild
// could not check may be the only one to a blob.
func (s *digestSweep) rebuild(ctx context.Context) error {
	rep := &s.cur.Report.Rebuild
	switch {
	case !s.cur.Rebuild.Due:
		rep.NotRun = "not due: the last rebuild is more recent than the rebuild interval"
	case len(s.cfg.Layout.RebuildSources()) == 0:
		rep.NotRun = "no reference sources are configured"
	case s.dry:
		rep.NotRun = "a dry run does not rebuild (it would record references); the plan judges by the recorded ones"
	default:
		if err := s.runRebuild(ctx); err != nil {
			return err
		}
	}
	s.cur.Phase = digestPhaseTombstones
	return s.save(ctx)
}

// runRebuild runs the rebuild from the cursor's position, saving its
// position after every page, and records a complete one.
func (s *digestSweep) runRebuild(ctx context.Context) error {
	rep := &s.cur.Report.Rebuild
	rep.Ran = true
	b := &Rebuilder{
		Backend: s.s3, Store: s.store, Sources: s.cfg.Layout.RebuildSources(), Batch: s.batch,
		Logger: s.log, Now: s.run.Clock,
		Denied: func(src *cas.Source, err error) {
			if !slices.Contains(s.cur.Rebuild.Denied, src.Name) {
				s.cur.Rebuild.Denied = append(s.cur.Rebuild.Denied, src.Name)
			}
			s.denied(src.Bucket, "source", src.Name, err)
		},
	}
	if s.cur.Rebuild.Started == 0 {
		// The revision before the first listing: every decision written
		// before it is older than anything this rebuild reads.
		resp, err := s.cli().Get(ctx, s.keys().Cursor(rebuildStateName), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("digestsweep: read the etcd revision before the rebuild: %w", err)
		}
		s.cur.Rebuild.Started = resp.Header.Revision
		s.cur.Rebuild.Pos, s.cur.Rebuild.Result = RebuildPos{}, RebuildResult{}
		if err := s.save(ctx); err != nil {
			return err
		}
	}
	start := s.cur.Rebuild.Result
	res, err := b.Run(ctx, s.cur.Rebuild.Pos, start, func(pos RebuildPos, res RebuildResult) error {
		s.cur.Rebuild.Pos, s.cur.Rebuild.Result = pos, res
		return s.save(ctx)
	})
	if n := res.UnknownRefs - start.UnknownRefs; n > 0 {
		s.metrics.UnknownRefs(n)
	}
	s.cur.Rebuild.Result = res
	rep.Result = &res
	if err != nil && (errors.Is(err, sweep.ErrFenced) || ctx.Err() != nil) {
		return err
	}
	if len(s.cur.Rebuild.Denied) > 0 {
		// The references of a denied source are unknown: the rebuild is
		// not complete (no proof, no record of it), and no blob is judged.
		s.keepAll(fmt.Sprintf("the backend denies the reclaimer's key reference source(s) %s (AccessDenied): the references they hold are unknown",
			strings.Join(s.cur.Rebuild.Denied, ", ")))
	}
	if err != nil {
		rep.Failed = err.Error()
		s.log.Error("rebuild of the recorded references failed: the digest sweep deletes nothing this pass", "pass", s.cur.Pass, "err", err)
		return nil
	}
	if res.UnknownRefs > 0 {
		s.log.Warn("the rebuild found references written around the gateway; they are retained",
			"pass", s.cur.Pass, "objects", res.Unknown, "references", res.UnknownRefs)
	}
	if len(s.cur.Rebuild.Denied) > 0 {
		return nil
	}
	finished := s.clock().UTC()
	rep.Last = finished
	s.cur.Rebuild.Proof = s.cur.Rebuild.Started
	b2, _ := json.Marshal(lastRebuild{Version: sweepCursorVersion, Pass: s.cur.Pass, Started: s.cur.Rebuild.Started, Finished: finished, Result: res, Layout: s.cfg.Layout.Fingerprint()})
	return s.save(ctx, clientv3.OpPut(s.keys().Cursor(rebuildStateName), string(b2)))
}

// A reference object in a versioned bucket is every stored version of its
// key: a version stays restorable (GET ?versionId, or a copy of it made
// current) for as long as it is stored, so what it names must stay stored
// too. The record of such a key keeps the union of what its stored
// versions name; a delete marker names nothing and hides nothing from the
// rebuild, which lists versions rather than objects in such a bucket.
// Reading a listed key's bodies and settling its record is
// digests.RecordChecker's, which the Service also uses after a delete.

// keyPage is one page of a rebuild's listing: its keys, and where the
// listing goes on.
type keyPage struct {
	s3client.ObjectPage
	keys []digests.ListedKey
}

// list lists the page of src at pos (continuing cont when set): objects,
// or the versions of whole keys where src's bucket may hold versions. A
// content namespace's blobs are listed as objects: a blob's key names its
// content, so its versions name the same digests.
func (b *Rebuilder) list(ctx context.Context, src *cas.Source, pos RebuildPos, cont *s3client.ObjectPage, batch int) (keyPage, error) {
	versioned := false
	if src.Kind != cas.KindContent {
		v, err := b.Backend.Versioning(ctx, src.Bucket)
		if err != nil {
			return keyPage{}, err
		}
		versioned = v.MayHoldVersions()
	}
	if versioned {
		vp, err := b.Backend.ListVersions(ctx, src.Bucket, src.Prefix, pos.After, batch)
		if err != nil {
			return keyPage{}, err
		}
		page := keyPage{ObjectPage: s3client.ObjectPage{Next: vp.Next, Done: vp.Done}}
		for i := 0; i < len(vp.Versions); {
			j := i
			for j < len(vp.Versions) && vp.Versions[j].Key == vp.Versions[i].Key {
				j++
			}
			page.keys = append(page.keys, digests.VersionedKey(vp.Versions[i].Key, vp.Versions[i:j]))
			i = j
		}
		return page, nil
	}
	var op s3client.ObjectPage
	var err error
	if cont != nil {
		op, err = b.Backend.ListObjectsNext(ctx, src.Bucket, src.Prefix, *cont, batch)
	} else {
		op, err = b.Backend.ListObjects(ctx, src.Bucket, src.Prefix, pos.After, batch)
	}
	if err != nil {
		return keyPage{}, err
	}
	page := keyPage{ObjectPage: op, keys: make([]digests.ListedKey, len(op.Objects))}
	for i, o := range op.Objects {
		page.keys[i] = digests.ListedKey{Key: o.Key, ETag: o.ETag, Size: o.Size}
	}
	page.Objects = nil
	return page, nil
}

// RebuiltAfter reports whether a complete rebuild (every reference source
// read, none denied, none failed) started after etcd revision rev, and
// says what stands in the way when not. With no reference source there is
// nothing a rebuild could read back, so it holds at once. The restore mark
// is cleared only once it holds for the mark's revision: every reference
// the snapshot lost that a source on the backend still holds is then
// recorded again.
func (sw *Sweep) RebuiltAfter(ctx context.Context, rev int64) (bool, string, error) {
	if len(sw.cfg.Layout.RebuildSources()) == 0 {
		return true, "", nil
	}
	s := &digestSweep{Sweep: sw}
	last, ok, err := s.lastRebuild(ctx)
	if err != nil {
		return false, "", err
	}
	switch {
	case !ok:
		return false, "no rebuild has completed yet", nil
	case last.Layout != sw.cfg.Layout.Fingerprint():
		return false, "the last complete rebuild read another layout", nil
	case last.Started <= rev:
		return false, fmt.Sprintf("the last complete rebuild started at revision %d, not after the restore mark's %d", last.Started, rev), nil
	}
	return true, "", nil
}
