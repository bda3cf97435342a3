package digests

import (
	"context"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/s3client"
)

// pagesAhead is how many listing pages the inventories read at once, ahead
// of the page whose tombstones are written. The inventories read at the
// pass revision (or prove their reads page by page), so a page's verdict
// does not depend on the tombstones written for the pages before it.
const pagesAhead = 4

// judgedPage is one listing page of a namespace with what the inventories
// retain of it: t counts what the page holds (stored, ignored, stale
// placements); err is the listing's error, rerr the inventories'.
type judgedPage struct {
	page     s3client.ObjectPage
	err      error
	t        Report
	blobs    []Blob
	retained map[string]string
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
		for {
			page, err := s.s3.ListObjects(ctx, ns.Bucket, ns.Prefix, after, s.batch)
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
			after = page.Next
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
	}
	return j
}
