package digestsweep

import (
	"context"
	"sync"
)

// maxDeleteKeys is the most keys one DeleteObjects request carries.
const maxDeleteKeys = 1000

// deletes takes the blobs the collector guarded through their deletion:
// it gathers them by bucket into requests of maxDeleteKeys, and has up to
// digests.delete_parallel requests in flight, each recording its attempt
// on its own guards, sending its own DeleteObjects and settling its own
// blobs from its own answer (deleteGuarded), so one request's unclear
// answer keeps only its guards armed. It moves the cursor past a page of
// tombstones once every blob the page guarded is settled, and never while
// a request has failed.
type deletes struct {
	// del deletes and settles one request's batch (deleteGuarded); past
	// records the cursor past the page whose last tombstone key is last
	// (collectedPast).
	del   func(ctx context.Context, batch []armed) error
	past  func(ctx context.Context, last string) error
	slots chan struct{} // one per request in flight
	wg    sync.WaitGroup
	// held is what is guarded and not yet sent, by bucket; next numbers
	// the pages.
	held map[string][]armed
	next int

	mu sync.Mutex
	// pages is the pages whose blobs are not all settled, in cursor
	// order, pages[0] being page number first; err is the first error of
	// a request.
	pages []pageLeft
	first int
	err   error
}

// pageLeft is a page of tombstones: its last key and how many of the
// blobs it guarded are not yet settled.
type pageLeft struct {
	last string
	left int
}

func (s *digestSweep) newDeletes() *deletes {
	return newDeletes(s.cfg.DeleteParallel, s.deleteGuarded, s.collectedPast)
}

// newDeletes returns an empty queue that has up to parallel requests in
// flight, each deleting and settling its batch with del, and records the
// cursor past a settled page with past (the pass's newDeletes gives it
// deleteGuarded and collectedPast).
func newDeletes(parallel int, del func(context.Context, []armed) error, past func(context.Context, string) error) *deletes {
	return &deletes{del: del, past: past, slots: make(chan struct{}, parallel), held: map[string][]armed{}}
}

// collectedPast records the collector's cursor (fenced) past the page of
// tombstones whose last key is last, then fires FaultCollected.
func (s *digestSweep) collectedPast(ctx context.Context, last string) error {
	s.mu.Lock()
	s.cur.Collect = last
	s.mu.Unlock()
	if err := s.save(ctx); err != nil {
		return err
	}
	s.run.Fire(FaultCollected)
	return nil
}

// add takes a page's guarded blobs (last is the page's last tombstone
// key), sends every full request, and moves the cursor past the pages
// that are settled.
func (d *deletes) add(ctx context.Context, last string, guarded []armed) error {
	page := d.next
	d.next++
	d.mu.Lock()
	d.pages = append(d.pages, pageLeft{last: last, left: len(guarded)})
	d.mu.Unlock()
	for _, a := range guarded {
		a.page = page
		b := a.tomb.Bucket
		d.held[b] = append(d.held[b], a)
		if len(d.held[b]) == maxDeleteKeys {
			d.send(ctx, d.held[b])
			delete(d.held, b)
		}
	}
	return d.advance(ctx)
}

// flushAll sends what is held, however short its requests.
func (d *deletes) flushAll(ctx context.Context) {
	for b, batch := range d.held {
		d.send(ctx, batch)
		delete(d.held, b)
	}
}

// send deletes batch in a request of its own once fewer than
// digests.delete_parallel are in flight.
func (d *deletes) send(ctx context.Context, batch []armed) {
	d.slots <- struct{}{}
	d.wg.Go(func() {
		defer func() { <-d.slots }()
		err := d.del(ctx, batch)
		d.mu.Lock()
		defer d.mu.Unlock()
		if err != nil {
			// The batch's pages stay unsettled: the cursor stays before
			// them.
			if d.err == nil {
				d.err = err
			}
			return
		}
		for _, a := range batch {
			d.pages[a.page-d.first].left--
		}
	})
}

// wait waits for every request in flight and moves the cursor past the
// pages that are settled; it returns the first error of a request.
func (d *deletes) wait(ctx context.Context) error {
	d.wg.Wait()
	return d.advance(ctx)
}

// advance records the cursor past the leading pages whose blobs are all
// settled, unless a request failed.
func (d *deletes) advance(ctx context.Context) error {
	d.mu.Lock()
	if d.err != nil {
		d.mu.Unlock()
		return d.err
	}
	n := 0
	for n < len(d.pages) && d.pages[n].left == 0 {
		n++
	}
	if n == 0 {
		d.mu.Unlock()
		return nil
	}
	last := d.pages[n-1].last
	d.pages = d.pages[n:]
	d.first += n
	d.mu.Unlock()
	return d.past(ctx, last)
}
