package reclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// Upload is one multipart upload found on the backend.
type Upload struct {
	Bucket    string
	Key       string
	UploadID  string
	Initiated time.Time
	Parts     int
	Bytes     int64
}

// uploadsOf returns the uploads of bucket that a listing page holds.
func uploadsOf(bucket string, listed []s3client.Upload) []Upload {
	out := make([]Upload, len(listed))
	for i, u := range listed {
		out[i] = Upload{Bucket: bucket, Key: u.Key, UploadID: u.UploadID, Initiated: u.Initiated}
	}
	return out
}

// item is one examined upload: what the backend holds, what etcd said at
// the pass's revision, and the verdict.
type item struct {
	Upload
	Decision
	// SessionRev and ActivityRev are the mod revisions read at the pass's
	// revision (ActivityRev 0: no activity key).
	SessionRev  int64
	ActivityRev int64
	// Vanished: listed, but gone before its parts could be listed.
	Vanished bool
	// Unlisted: missing from the backend's listing but found through its
	// session (MinIO lists only the uploads made since it started).
	Unlisted bool
	// Session is the upload's session at the pass's revision, nil when
	// it had none.
	Session *etcdstore.Versioned[etcdstore.Session]
}

// inventory walks the backend's multipart uploads in bounded pages and
// judges each against the sessions as they were at one etcd revision.
type inventory struct {
	s3       *s3client.Client
	store    *etcdstore.Store
	policy   Policy
	now      time.Time
	rev      int64
	batch    int
	parallel int
	// checkBudget bounds the backend checks for sessions without a listed
	// upload; missingChecks counts those spent (carried across resumes).
	checkBudget   int64
	missingChecks int64
	// orphansOnly: only tell held uploads from the rest (an orphan
	// listing); no classification, no search for missing uploads.
	orphansOnly bool
	// buckets, when set, are the buckets to list (reclaim.buckets, sorted);
	// otherwise every bucket ListBuckets returns but those of exclude
	// (Config.ExcludeBuckets), whose state another shard keeps.
	buckets []string
	exclude []string
	// limit, when above 0, is a bounded pass's budget: the inventory
	// lists at most limit uploads in all (listed counts them, carried
	// across resumes) and then stops with errSliceFull (see slice.go).
	limit, listed int64
	// restoreFloor is the revision of the latest restore mark (0: none):
	// a session last written at or below it is marked afresh rather than
	// deleted (restoreRemark).
	restoreFloor int64
}

// handler receives the inventory's results in order. page is called for
// each batch of examined uploads; pos is where the inventory stands once
// the batch is counted, and final says whether pos may be recorded (the
// last batch of a listing page). missing is called with a bucket's sessions
// that have no backend upload. denied is called for a bucket whose listing
// the backend refused (AccessDenied): nothing in it was judged, and pos
// is past it.
type handler interface {
	page(ctx context.Context, items []item, pos position, final bool) error
	missing(ctx context.Context, m []Missing, unverified int64, pos position) error
	denied(ctx context.Context, bucket string, pos position) error
}

// walk runs the inventory from pos to the end.
func (inv *inventory) walk(ctx context.Context, pos position, h handler) error {
	if pos.Finished {
		return nil
	}
	buckets := inv.buckets
	if buckets == nil {
		var err error
		if buckets, err = inv.s3.ListBuckets(ctx); err != nil {
			return err
		}
		buckets = slices.DeleteFunc(buckets, func(b string) bool { return slices.Contains(inv.exclude, b) })
	}
	for _, b := range buckets {
		if pos.Bucket != "" && (b < pos.Bucket || b == pos.Bucket && pos.BucketDone) {
			continue
		}
		from := position{Bucket: b}
		if b == pos.Bucket {
			from = pos
		}
		if err := inv.bucket(ctx, from, h); err != nil {
			return err
		}
	}
	if inv.orphansOnly {
		return nil
	}
	return inv.elsewhere(ctx, buckets, h)
}

// bucket inventories one bucket from pos, then finds its sessions that
// have no upload.
func (inv *inventory) bucket(ctx context.Context, pos position, h handler) error {
	b := pos.Bucket
	// seen holds the upload ids listed by this run. After a resume into
	// the bucket it lacks the ones listed before, which were counted
	// then: a session whose upload the backend has cannot be told from
	// those, so it is left alone rather than counted twice (partial).
	seen := make(map[string]struct{})
	partial := pos.KeyMarker != "" || pos.Listed || pos.AfterKey != ""
	km, um := pos.KeyMarker, pos.UploadIDMarker
	// ahead: the early search for sessions without an upload (wholePage).
	ctx, cancel := context.WithCancel(ctx)
	var ahead chan missingFound
	defer func() {
		cancel()
		if ahead != nil {
			<-ahead
		}
	}()
	for !pos.Listed {
		want, err := inv.budget()
		if err != nil {
			return err
		}
		page, err := inv.s3.ListUploads(ctx, b, km, um, want)
		if errors.Is(err, s3client.ErrNoSuchBucket) {
			page, err = s3client.UploadPage{Done: true}, nil
		}
		if errors.Is(err, s3client.ErrAccessDenied) {
			// Skipped whole: its sessions are not looked for either, so
			// none of them can look missing for want of a listing.
			return h.denied(ctx, b, position{Bucket: b, BucketDone: true})
		}
		if err != nil {
			return err
		}
		next := position{Bucket: b, KeyMarker: page.NextKey, UploadIDMarker: page.NextUploadID}
		if page, next, err = inv.within(page, pos, next, want); err != nil {
			return err
		}
		var judged []item
		if km == "" && pos.AfterKey == "" && page.Done && len(page.Uploads) > 0 {
			if judged, ahead, err = inv.wholePage(ctx, b, page.Uploads); err != nil {
				return err
			}
		}
		if page.Done {
			next = position{Bucket: b, Listed: true}
		}
		// A backend may ignore max-uploads (MinIO lists everything in one
		// page); examine it in batches all the same.
		for start := 0; start < len(page.Uploads) || start == 0; start += inv.batch {
			end := min(start+inv.batch, len(page.Uploads))
			var items []item
			if judged != nil {
				items = judged[start:end]
			} else if items, err = inv.examine(ctx, uploadsOf(b, page.Uploads[start:end]), false, etcdstore.SessionStretch{}); err != nil {
				return err
			}
			for _, it := range items {
				seen[it.UploadID] = struct{}{}
			}
			if err := h.page(ctx, items, next, end == len(page.Uploads)); err != nil {
				return err
			}
			if end == len(page.Uploads) {
				break
			}
		}
		pos = next
		km, um = next.KeyMarker, next.UploadIDMarker
	}
	if inv.orphansOnly {
		return nil
	}
	done := position{Bucket: b, BucketDone: true}
	found := inv.awaitMissing(ctx, &ahead, b, seen, partial)
	missing, unlisted, unverified := found.missing, found.unlisted, found.unverified
	if found.err != nil {
		return found.err
	}
	if len(unlisted) > 0 {
		items, err := inv.examine(ctx, unlisted, false, etcdstore.SessionStretch{})
		if err != nil {
			return err
		}
		for i := range items {
			items[i].Unlisted = true
		}
		// Recorded with the missing sessions below, in one transaction, so
		// that a resume cannot count them twice.
		if err := h.page(ctx, items, done, false); err != nil {
			return err
		}
	}
	return h.missing(ctx, missing, unverified, done)
}

// missingFound is what missingIn found.
type missingFound struct {
	missing    []Missing
	unlisted   []Upload
	unverified int64
	err        error
}

// awaitMissing receives the early search's outcome from *ahead and clears
// it, or searches now when none was started.
func (inv *inventory) awaitMissing(ctx context.Context, ahead *chan missingFound, bucket string, seen map[string]struct{}, partial bool) missingFound {
	if *ahead != nil {
		f := <-*ahead
		*ahead = nil
		return f
	}
	var f missingFound
	f.missing, f.unlisted, f.unverified, f.err = inv.missingIn(ctx, bucket, seen, partial)
	return f
}

// elsewhere finds sessions in buckets the backend does not list.
func (inv *inventory) elsewhere(ctx context.Context, buckets []string, h handler) error {
	listed := make(map[string]bool, len(buckets))
	for _, b := range buckets {
		listed[b] = true
	}
	// Only the configured buckets are the pass's to judge: a session
	// elsewhere is not missing, just not looked at.
	var withSessions []string
	if inv.buckets == nil {
		var err error
		if withSessions, err = inv.store.SessionBucketsAt(ctx, inv.rev); err != nil {
			return err
		}
	}
	var all []Missing
	var unverified int64
	for _, b := range withSessions {
		if listed[b] || slices.Contains(inv.exclude, b) {
			continue
		}
		// The backend does not list the bucket, so whatever it has there
		// (unlisted) is unreachable for a pass; the sessions are reported.
		m, _, u, err := inv.missingIn(ctx, b, nil, true)
		if err != nil {
			return err
		}
		all = append(all, m...)
		unverified += u
	}
	return h.missing(ctx, all, unverified, position{Finished: true})
}

// examine judges a batch of uploads. It reads their records at the pass's
// revision in a few transactions (not several requests per upload), and
// the backend's parts only where the gateway's records cannot stand for
// them: an upload it would delete (the breaker's max_delete counts its
// parts exactly), one with no session (an orphan, held for a person) and
// one with no part record (made around the gateway, or before it). Any
// other upload counts the parts the gateway recorded, which the backend
// holds too, so the breaker's stored parts never exceed the backend's and
// its fraction is never looser; an upload about to be marked has its parts
// read from the backend in act, right before the mark. Any failed read
// fails the batch: a verdict without its inputs is not made. inOrder says
// the uploads are one stretch of a bucket's sorted listing read with
// etcdstore.UploadStatesInStretchAt over stretch; the records read are
// the same.
func (inv *inventory) examine(ctx context.Context, uploads []Upload, inOrder bool, stretch etcdstore.SessionStretch) ([]item, error) {
	refs := make([]etcdstore.UploadRef, len(uploads))
	for i, u := range uploads {
		refs[i] = etcdstore.UploadRef{Bucket: u.Bucket, UploadID: u.UploadID}
	}
	var states []etcdstore.UploadState
	var err error
	if inOrder {
		states, err = inv.store.UploadStatesInStretchAt(ctx, inv.rev, refs, stretch)
	} else {
		states, err = inv.store.UploadStatesAt(ctx, inv.rev, refs)
	}
	if err != nil {
		return nil, err
	}
	items := make([]item, len(uploads))
	var slow []int // the uploads judge must read more for
	for i, u := range uploads {
		items[i] = inv.decide(u, states[i])
		if it := &items[i]; it.Session == nil || it.Verdict == Delete || it.Parts == 0 {
			slow = append(slow, i)
		}
	}
	errs := make([]error, len(slow))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(inv.parallel, 1))
	for j, i := range slow {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[j] = inv.judge(ctx, &items[i])
			if errs[j] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// Report the first cause rather than the cancellations it caused.
		for _, e := range errs {
			if e != nil && !errors.Is(e, context.Canceled) {
				return nil, e
			}
		}
		return nil, err
	}
	return items, nil
}

// examineInOrder judges the uploads of one bucket's whole listing as
// examine does, in batches of consecutive uploads in session key order, so
// that each batch reads its sessions with one range scan
// (etcdstore.UploadStatesInStretchAt) instead of one read each and the
// batches read the bucket's sessions once in all: the stretches of the
// batches cover the bucket's session keys, and each session that is not a
// listed upload's goes to other, in key order (unless other is nil). The
// items come in the order of uploads, without their sessions (which only
// examine uses), so that a whole listing's verdicts weigh little more
// than the listing.
func (inv *inventory) examineInOrder(ctx context.Context, uploads []Upload, other func(etcdstore.Versioned[etcdstore.Session]) error) ([]item, error) {
	ids := make([]string, len(uploads))
	for i, u := range uploads {
		ids[i] = u.UploadID
	}
	order := etcdstore.InSessionOrder(ids)
	out := make([]item, len(uploads))
	batch := make([]Upload, 0, inv.batch)
	for start := 0; start < len(order); start += inv.batch {
		idx := order[start:min(start+inv.batch, len(order))]
		batch = batch[:0]
		for _, i := range idx {
			batch = append(batch, uploads[i])
		}
		stretch := etcdstore.SessionStretch{Other: other}
		if other != nil {
			stretch.FromStart, stretch.ToEnd = start == 0, start+inv.batch >= len(order)
			if start > 0 {
				stretch.After = uploads[order[start-1]].UploadID
			}
		}
		items, err := inv.examine(ctx, batch, true, stretch)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			out[i] = items[j]
			out[i].Session = nil
		}
	}
	return out, nil
}

// decide judges an upload by its records at the pass's revision. An
// upload without a session is left for judge.
func (inv *inventory) decide(u Upload, st etcdstore.UploadState) item {
	it := item{Upload: u, Session: st.Session}
	if st.Session == nil {
		return it
	}
	it.SessionRev = st.Session.ModRev
	it.Parts, it.Bytes = st.Parts, st.Bytes
	if inv.orphansOnly {
		it.Decision = Decision{Verdict: Keep, Reason: "has a session"}
		return it
	}
	if st.Activity != nil {
		it.ActivityRev = st.Activity.ModRev
	}
	it.Decision = Classify(inv.policy, inv.now, &st.Session.Value, st.RecordedActivity())
	if it.FutureTime {
		return it
	}
	it.Decision = streaming(it.Decision, st.InFlight, st.InFlightSince)
	it.Decision = restoreRemark(it.Decision, it.SessionRev, inv.restoreFloor)
	return it
}

// judge finishes what decide left: an upload with no session at the pass's
// revision is kept when its session was made since, and held otherwise;
// then it counts the parts the backend has.
func (inv *inventory) judge(ctx context.Context, it *item) error {
	u := it.Upload
	if it.Session == nil {
		// A session made after the pass's revision is not an orphan.
		_, err := inv.store.GetSession(ctx, u.Bucket, u.UploadID)
		if err == nil {
			it.Decision = Decision{Verdict: Keep, Reason: "session created after this pass began"}
			return nil
		}
		if !errors.Is(err, etcdstore.ErrNotFound) {
			return err
		}
		it.Decision = Classify(inv.policy, inv.now, nil, nil)
	}
	parts, size, err := inv.s3.CountParts(ctx, u.Bucket, u.Key, u.UploadID)
	if errors.Is(err, s3client.ErrNoSuchUpload) || errors.Is(err, s3client.ErrNoSuchBucket) {
		it.Vanished = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("list parts of %s/%s: %w", u.Bucket, u.Key, err)
	}
	it.Parts, it.Bytes = parts, size
	return nil
}

// missingIn finds the sessions of bucket (at the pass's revision) that are
// not terminal and whose upload was not listed, and looks each up: a
// session that changed since is left to the next pass; an upload the
// backend does not have makes the session missing; an upload it has
// although its listing did not show it is returned as unlisted, to be
// judged like any other, unless seen is partial. Past the check budget,
// candidates are counted as unverified instead.
func (inv *inventory) missingIn(ctx context.Context, bucket string, seen map[string]struct{}, partial bool) (missing []Missing, unlisted []Upload, unverified int64, err error) {
	m := &missingSearch{inv: inv, bucket: bucket, seen: seen, partial: partial}
	// A listed upload's session is skipped before it is decoded.
	listed := func(id string) bool { _, ok := seen[id]; return ok }
	err = inv.store.ScanSessionsExceptAt(ctx, bucket, inv.rev, int64(max(inv.batch, 100)), listed, func(v etcdstore.Versioned[etcdstore.Session]) error {
		return m.check(ctx, v)
	})
	return m.found.missing, m.found.unlisted, m.found.unverified, err
}

// budget is how many uploads the next listing page asks for: the batch,
// or less when a bounded pass has less of its budget left. A spent budget
// is errSliceFull.
func (inv *inventory) budget() (int, error) {
	if inv.limit <= 0 {
		return inv.batch, nil
	}
	left := inv.limit - inv.listed
	if left <= 0 {
		return 0, errSliceFull
	}
	return int(min(int64(inv.batch), left)), nil
}

// within cuts a listing page to a bounded pass's budget and counts it;
// next is where the inventory stands after the page as listed, and the
// position returned where it stands after the page as cut.
//
// A backend that answers with no more uploads than asked is followed by
// its own markers. One that answers with more (MinIO lists a bucket whole,
// in no set order, and ignores max-uploads and the markers) is cut in
// (key, upload id) order instead: the slice takes the first uploads after
// the last one examined (pos.AfterKey, pos.AfterID), and the next pass
// asks for the bucket from its start again and skips what lies before.
func (inv *inventory) within(page s3client.UploadPage, pos, next position, want int) (s3client.UploadPage, position, error) {
	if inv.limit <= 0 {
		return page, next, nil
	}
	if pos.AfterKey == "" && len(page.Uploads) <= want {
		inv.listed += int64(len(page.Uploads))
		return page, next, nil
	}
	if !page.Done {
		return page, next, fmt.Errorf("reclaim: the backend answered a listing of %s with %d uploads, more than the %d asked, and truncated it: a bounded pass cannot tell where it stands (set reclaim.pass_uploads to 0)", pos.Bucket, len(page.Uploads), want)
	}
	after := func(u s3client.Upload) bool {
		return u.Key > pos.AfterKey || u.Key == pos.AfterKey && u.UploadID > pos.AfterID
	}
	ups := slices.DeleteFunc(slices.Clone(page.Uploads), func(u s3client.Upload) bool { return !after(u) })
	slices.SortFunc(ups, func(a, b s3client.Upload) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.UploadID, b.UploadID))
	})
	if len(ups) > want {
		ups = ups[:want]
		last := ups[len(ups)-1]
		page.Done = false
		next = position{Bucket: pos.Bucket, AfterKey: last.Key, AfterID: last.UploadID}
	}
	page.Uploads = ups
	inv.listed += int64(len(ups))
	return page, next, nil
}
