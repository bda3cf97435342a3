package reclaim

import (
	"context"
	"errors"
	"fmt"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// missingSearch judges, one at a time and in key order, a bucket's
// sessions at the pass's revision that may lack an upload (see missingIn),
// and gathers what it found.
type missingSearch struct {
	inv     *inventory
	bucket  string
	seen    map[string]struct{}
	partial bool
	found   missingFound
}

// check judges one session: a terminal one, or one whose upload was
// listed (seen), is passed over; past the check budget it is counted as
// unverified; otherwise it is read again, and one that changed since the
// pass's revision is left to the next pass, while the backend is asked
// about the upload of one that did not.
func (m *missingSearch) check(ctx context.Context, v etcdstore.Versioned[etcdstore.Session]) error {
	inv, s := m.inv, v.Value
	if s.State.Terminal() {
		return nil
	}
	if _, ok := m.seen[s.UploadID]; ok {
		return nil
	}
	if inv.missingChecks >= inv.checkBudget {
		m.found.unverified++
		return nil
	}
	inv.missingChecks++
	cur, err := inv.store.GetSession(ctx, m.bucket, s.UploadID)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.ModRev != v.ModRev {
		return nil // it moved on since; the next pass looks again
	}
	present, err := inv.s3.UploadExists(ctx, m.bucket, s.Key, s.UploadID)
	if err != nil {
		return fmt.Errorf("check upload of session %s/%s: %w", m.bucket, s.UploadID, err)
	}
	switch {
	case present && m.partial:
	case present:
		m.found.unlisted = append(m.found.unlisted, Upload{Bucket: m.bucket, Key: s.Key, UploadID: s.UploadID, Initiated: s.Created})
	default:
		m.found.missing = append(m.found.missing, Missing{Bucket: m.bucket, Key: s.Key, UploadID: s.UploadID, State: s.State, LastActivity: s.LastActivity})
	}
	return nil
}

// missingQueue is how many sessions the in-order reads of a whole page
// hand ahead of the search for sessions without an upload.
const missingQueue = 256

// wholePage judges a page that holds the whole of bucket's uploads
// (MinIO lists everything in one page) with examineInOrder, whose reads
// of the bucket's sessions also serve the search for its sessions without
// an upload: the page names every upload this run lists in the bucket, so
// the sessions the reads find besides the listed uploads' are the ones
// missingIn would look at, in the same order. The search runs meanwhile,
// on a bounded queue; its outcome arrives on the channel returned (nil
// for an orphan listing, which does not search), which the caller must
// receive from.
func (inv *inventory) wholePage(ctx context.Context, bucket string, listed []s3client.Upload) ([]item, chan missingFound, error) {
	uploads := uploadsOf(bucket, listed)
	if inv.orphansOnly {
		judged, err := inv.examineInOrder(ctx, uploads, nil)
		return judged, nil, err
	}
	m := &missingSearch{inv: inv, bucket: bucket, seen: make(map[string]struct{}, len(listed))}
	for _, u := range listed {
		m.seen[u.UploadID] = struct{}{}
	}
	others := make(chan etcdstore.Versioned[etcdstore.Session], missingQueue)
	ahead := make(chan missingFound, 1)
	go func() {
		var err error
		for v := range others {
			if err == nil {
				err = m.check(ctx, v)
			}
		}
		m.found.err = err
		ahead <- m.found
	}()
	judged, err := inv.examineInOrder(ctx, uploads, func(v etcdstore.Versioned[etcdstore.Session]) error {
		select {
		case others <- v:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(others)
	return judged, ahead, err
}
