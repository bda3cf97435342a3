package digestsweep

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// pagesAhead is how many listing pages the inventories read at once, ahead
// of the page whose tombstones are written. The inventories read at the
// pass revision (or prove their reads page by page), so a page's verdict
// does not depend on the tombstones written for the pages before it.
const pagesAhead = 4

// judgedPage is one listing page of a namespace with what the inventories
// retain of it: t counts what the page holds (stored, ignored, stale
// placements); err is the listing's error, rerr the inventories'. uploads
// holds the uploads inventory's answers, read ahead, about the blobs that
// nothing in retained keeps and whose tombstone is pending or ready at the
// pass revision: true when an upload into the blob's key is in flight.
type judgedPage struct {
	page     s3client.ObjectPage
	err      error
	t        Report
	blobs    []Blob
	retained map[string]string
	uploads  map[string]bool
	rerr     error
}

// judgeAhead lists ns after after page by page, and has the inventories
// read up to pagesAhead pages at once. The pages arrive in listing order,
// each on its own channel once read; the listing stops after the
// namespace's last page or a listing error, and when ctx ends. Memory is
// bounded by pagesAhead pages of the batch size.
func (s *digestSweep) judgeAhead(ctx context.Context, ns *cas.Namespace, after string) <-chan chan judgedPage {
	out := make(chan chan judgedPage, pagesAhead-1)
	go func() {
		defer close(out)
		// The first page starts after the cursor; each one after it
		// continues the listing (ListObjectsNext), which lists the same
		// objects without the backend starting a listing a page.
		var prev *s3client.ObjectPage
		for {
			var page s3client.ObjectPage
			var err error
			if prev == nil {
				page, err = s.s3.ListObjects(ctx, ns.Bucket, ns.Prefix, after, s.batch)
			} else {
				page, err = s.s3.ListObjectsNext(ctx, ns.Bucket, ns.Prefix, *prev, s.batch)
			}
			one := make(chan judgedPage, 1)
			select {
			case out <- one:
			case <-ctx.Done():
				return
			}
			if err != nil {
				one <- judgedPage{page: page, err: err}
				return
			}
			go func() { one <- s.judgePage(ctx, ns, page) }()
			if page.Done {
				return
			}
			prev = &s3client.ObjectPage{Next: page.Next, Token: page.Token}
		}
	}()
	return out
}

// judgePage finds the blobs of a listing page of ns and asks the
// inventories about them.
func (s *digestSweep) judgePage(ctx context.Context, ns *cas.Namespace, page s3client.ObjectPage) judgedPage {
	j := judgedPage{page: page, blobs: make([]Blob, 0, len(page.Objects))}
	for _, o := range page.Objects {
		d, ok := ns.Digest(o.Key)
		if !ok {
			j.t.Ignored++
			continue
		}
		j.blobs = append(j.blobs, Blob{Digest: d, Bucket: ns.Bucket, Key: o.Key, Size: o.Size, Modified: o.Modified})
		j.t.Stored++
		j.t.StoredBytes += o.Size
	}
	if len(j.blobs) > 0 {
		j.retained, j.rerr = s.retained(ctx, j.blobs, s.inventoriesCounting(&j.t.StalePlacements))
		if j.rerr == nil {
			j.uploads, j.rerr = s.uploadsAhead(ctx, j.blobs, j.retained)
		}
	}
	return j
}

// The uploads inventory asks the backend about one blob per request, so
// the sweep asks it only where its answer can keep a blob from being
// deleted: about a blob that nothing else retains and whose tombstone is
// pending or ready when it is judged. Only such a blob can be made ready,
// or confirmed ready, in this pass (judge advances a tombstone one step a
// pass, and never makes ready the one it made pending); a blob without a
// live tombstone gets at most a pending one, which deletes nothing, and is
// asked about in the pass that could make it ready. So a blob is never
// made ready, nor collected, without the backend's answer, and a pass
// over blobs that only get pending tombstones asks the backend nothing.

// uploadsAhead asks the uploads inventory about the blobs of a page that
// nothing in retained keeps and whose tombstone is pending or ready at the
// pass revision, and returns its answer about each of them. The page's
// tombstones are read again when it is judged; uploadsJudged asks about
// any blob whose tombstone is live then but was not at the pass revision.
func (s *digestSweep) uploadsAhead(ctx context.Context, blobs []Blob, retained map[string]string) (map[string]bool, error) {
	var left []string
	for _, b := range blobs {
		if _, kept := retained[b.Digest]; !kept {
			left = append(left, b.Digest)
		}
	}
	live, err := s.liveTombstones(ctx, left)
	if err != nil {
		return nil, fmt.Errorf("read tombstones at revision %d: %w", s.cur.Rev, err)
	}
	var ask []Blob
	for _, b := range blobs {
		if live[b.Digest] {
			ask = append(ask, b)
		}
	}
	return s.askUploads(ctx, ask)
}

// uploadsJudged returns the digests of j's blobs that an upload in flight
// retains, among those nothing else retains and whose tombstone in tombs
// (read as the page is judged) is pending or ready. The answers read ahead
// serve; a blob not asked ahead is asked now.
func (s *digestSweep) uploadsJudged(ctx context.Context, j judgedPage, tombs map[string]*sweepTombstone) (map[string]bool, error) {
	out := map[string]bool{}
	var ask []Blob
	for _, b := range j.blobs {
		cur := tombs[b.Digest]
		if _, kept := j.retained[b.Digest]; kept || cur == nil || cur.Value.State.Terminal() {
			continue
		}
		found, asked := j.uploads[b.Digest]
		switch {
		case !asked:
			ask = append(ask, b)
		case found:
			out[b.Digest] = true
		}
	}
	late, err := s.askUploads(ctx, ask)
	if err != nil {
		return nil, err
	}
	for d, found := range late {
		if found {
			out[d] = true
		}
	}
	return out, nil
}

// askUploads returns the uploads inventory's answer about each of blobs.
func (s *digestSweep) askUploads(ctx context.Context, blobs []Blob) (map[string]bool, error) {
	out := make(map[string]bool, len(blobs))
	if len(blobs) == 0 {
		return out, nil
	}
	inv := s.uploadsInventory()
	found, err := inv.Retained(ctx, blobs)
	if err != nil {
		return nil, fmt.Errorf("inventory %s: %w", inv.Name(), err)
	}
	for _, b := range blobs {
		out[b.Digest] = found[b.Digest]
	}
	return out, nil
}

// liveTombstones returns the digests among digests whose tombstone is
// pending or ready at the pass revision, sweepTxnOps reads to a
// transaction. A tombstone that does not decode counts as live.
func (s *digestSweep) liveTombstones(ctx context.Context, digests []string) (map[string]bool, error) {
	out := map[string]bool{}
	keys := s.keys()
	var opts []clientv3.OpOption
	if s.cur.Rev > 0 {
		opts = []clientv3.OpOption{clientv3.WithRev(s.cur.Rev), clientv3.WithSerializable()}
	}
	for start := 0; start < len(digests); start += sweepTxnOps {
		group := digests[start:min(start+sweepTxnOps, len(digests))]
		ops := make([]clientv3.Op, len(group))
		for n, d := range group {
			ops[n] = clientv3.OpGet(keys.Tombstone(d), opts...)
		}
		resp, err := s.cli().Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, err
		}
		for n, r := range resp.Responses {
			rr := r.GetResponseRange()
			if rr == nil || len(rr.Kvs) == 0 {
				continue
			}
			var t etcdstore.Tombstone
			if err := etcdstore.DecodeKV(etcdstore.TombstoneRecord, rr.Kvs[0], &t); errors.Is(err, etcdstore.ErrNewerRecord) {
				return nil, err
			} else if err != nil || !t.State.Terminal() {
				out[group[n]] = true
			}
		}
	}
	return out, nil
}
