package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// The deletion queue (deletes) over a fake of its two effects: a request
// that deletes a batch, which waits until the test finishes it, with or
// without an error, and the save of the cursor past a page. Each test runs
// in a synctest bubble: synctest.Wait returns once every goroutine of the
// queue is blocked, so what is in flight is observed, never timed, and a
// request that could start has started.

// queueFake records what the queue asks of its del and past.
type queueFake struct {
	t  *testing.T
	mu sync.Mutex
	// waiting is the requests in flight, in the order they started; sent
	// every request's batch, in that order; settled the keys of the blobs
	// whose request finished without error.
	waiting []*fakeRequest
	sent    [][]armed
	settled map[string]bool
	// pages is every page handed to the queue, in order; saves every key
	// the cursor was saved past, in order.
	pages []fakePage
	saves []string
	// blobs numbers the blobs made, so that every key is unique.
	blobs int
}

type fakeRequest struct {
	batch []armed
	done  chan error
}

type fakePage struct {
	last  string
	blobs []armed
}

// newQueueFake returns a fake whose requests still in flight when the test
// ends are failed, so the bubble's goroutines all exit.
func newQueueFake(t *testing.T) *queueFake {
	q := &queueFake{t: t, settled: map[string]bool{}}
	t.Cleanup(func() {
		for {
			synctest.Wait()
			q.mu.Lock()
			w := q.waiting
			q.waiting = nil
			q.mu.Unlock()
			if len(w) == 0 {
				return
			}
			for _, r := range w {
				r.done <- errors.New("fake: test over")
			}
		}
	})
	return q
}

// del is the queue's request: it waits until the test finishes it.
func (q *queueFake) del(_ context.Context, batch []armed) error {
	r := &fakeRequest{batch: slices.Clone(batch), done: make(chan error)}
	q.mu.Lock()
	q.waiting = append(q.waiting, r)
	q.sent = append(q.sent, r.batch)
	q.mu.Unlock()
	err := <-r.done
	if err == nil {
		q.mu.Lock()
		for _, a := range r.batch {
			q.settled[a.tomb.Key] = true
		}
		q.mu.Unlock()
	}
	return err
}

// past is the queue's cursor save: it fails the test if the cursor moves
// back, stays, or passes a page with a blob not settled, its own or an
// earlier page's.
func (q *queueFake) past(_ context.Context, last string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := len(q.saves); n > 0 && last <= q.saves[n-1] {
		q.t.Errorf("cursor saved past %q after %q: not forward", last, q.saves[n-1])
	}
	q.saves = append(q.saves, last)
	for _, p := range q.pages {
		for _, a := range p.blobs {
			if !q.settled[a.tomb.Key] {
				q.t.Errorf("cursor saved past %q while blob %s of page %q is not settled", last, a.tomb.Key, p.last)
				return nil
			}
		}
		if p.last == last {
			return nil
		}
	}
	q.t.Errorf("cursor saved past %q, no page handed to the queue", last)
	return nil
}

// newBlobs returns n guarded blobs of bucket, with keys never made before.
func (q *queueFake) newBlobs(bucket string, n int) []armed {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]armed, n)
	for i := range out {
		q.blobs++
		out[i] = armed{tomb: etcdstore.Tombstone{Bucket: bucket, Key: "blobs/" + strconv.Itoa(q.blobs), State: etcdstore.TombstoneReady}}
	}
	return out
}

// add hands d a page whose last tombstone key is last.
func (q *queueFake) add(ctx context.Context, d *deletes, last string, blobs []armed) error {
	q.mu.Lock()
	q.pages = append(q.pages, fakePage{last: last, blobs: blobs})
	q.mu.Unlock()
	return d.add(ctx, last, blobs)
}

// finish finishes the request in flight that holds the blob key with err,
// and waits until the queue has taken its answer.
func (q *queueFake) finish(key string, err error) {
	q.t.Helper()
	q.mu.Lock()
	i := slices.IndexFunc(q.waiting, func(r *fakeRequest) bool {
		return slices.ContainsFunc(r.batch, func(a armed) bool { return a.tomb.Key == key })
	})
	if i < 0 {
		q.mu.Unlock()
		q.t.Fatalf("no request in flight holds %s", key)
	}
	r := q.waiting[i]
	q.waiting = slices.Delete(q.waiting, i, i+1)
	q.mu.Unlock()
	r.done <- err
	synctest.Wait()
}

// inFlight returns how many requests are in flight and how many started.
func (q *queueFake) inFlight() (waiting, sent int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting), len(q.sent)
}

// cursor returns the key the cursor was last saved past ("": never).
func (q *queueFake) cursor() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.saves) == 0 {
		return ""
	}
	return q.saves[len(q.saves)-1]
}

// furthest returns the last key of the longest run of leading pages whose
// blobs are all settled: where the cursor may be, and should be once the
// queue has looked ("": no page).
func (q *queueFake) furthest() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	at := ""
	for _, p := range q.pages {
		for _, a := range p.blobs {
			if !q.settled[a.tomb.Key] {
				return at
			}
		}
		at = p.last
	}
	return at
}

// queuePageKey is the last tombstone key of page i.
func queuePageKey(i int) string { return fmt.Sprintf("/unit/tombstones/%04d", i) }

// TestDeletesGroupByBucket: the queue sends one bucket's blobs per
// request, at most maxDeleteKeys of them; a request is sent as soon as it
// is full, and flushAll sends the short ones, one per bucket. Every blob
// is sent exactly once.
func TestDeletesGroupByBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := newQueueFake(t)
		d := newDeletes(64, q.del, q.past)
		// a: 2500 over three pages, b: exactly 2000, c: 3, d: 999.
		pages := [][]armed{
			slices.Concat(q.newBlobs("a", 700), q.newBlobs("b", 400), q.newBlobs("c", 1)),
			slices.Concat(q.newBlobs("b", 600), q.newBlobs("a", 900), q.newBlobs("c", 2), q.newBlobs("d", 999)),
			slices.Concat(q.newBlobs("a", 900), q.newBlobs("b", 1000)),
		}
		count := map[string]int{"a": 2500, "b": 2000, "c": 3, "d": 999}
		for i, p := range pages {
			if err := q.add(ctx, d, queuePageKey(i), p); err != nil {
				t.Fatalf("add: %v", err)
			}
		}
		synctest.Wait()
		// Before flushAll: only the full requests.
		full := checkBatches(t, q, nil)
		for b, n := range count {
			if got, want := full[b], n/maxDeleteKeys; len(got) != want || slices.ContainsFunc(got, func(n int) bool { return n != maxDeleteKeys }) {
				t.Errorf("bucket %s (%d blobs) before flushAll: requests of %v keys, want %d of %d", b, n, got, want, maxDeleteKeys)
			}
		}
		d.flushAll(ctx)
		synctest.Wait()
		all := checkBatches(t, q, queuedKeys(pages))
		for b, n := range count {
			want := slices.Repeat([]int{maxDeleteKeys}, n/maxDeleteKeys)
			if n%maxDeleteKeys != 0 {
				want = append(want, n%maxDeleteKeys)
			}
			if got := all[b]; !slices.Equal(got, want) {
				t.Errorf("bucket %s (%d blobs) after flushAll: requests of %v keys, want %v", b, n, got, want)
			}
		}
		q.finishAll()
		if err := d.wait(ctx); err != nil {
			t.Fatalf("wait: %v", err)
		}
		if got, want := q.cursor(), queuePageKey(len(pages)-1); got != want {
			t.Errorf("cursor after every request = %q, want %q", got, want)
		}
	})
}

// checkBatches checks that every request sent so far holds blobs of one
// bucket, at most maxDeleteKeys, none sent before, and, when want is not
// nil, that exactly the blobs of want were sent. It returns the sizes of
// each bucket's requests, the full ones first.
func checkBatches(t *testing.T, q *queueFake, want map[string]bool) map[string][]int {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	sizes, seen := map[string][]int{}, map[string]bool{}
	for _, batch := range q.sent {
		if len(batch) == 0 || len(batch) > maxDeleteKeys {
			t.Errorf("request of %d keys, want 1 to %d", len(batch), maxDeleteKeys)
			continue
		}
		b := batch[0].tomb.Bucket
		for _, a := range batch {
			if a.tomb.Bucket != b {
				t.Errorf("one request holds blobs of buckets %s and %s", b, a.tomb.Bucket)
			}
			if seen[a.tomb.Key] {
				t.Errorf("blob %s sent twice", a.tomb.Key)
			}
			seen[a.tomb.Key] = true
		}
		sizes[b] = append(sizes[b], len(batch))
	}
	for b := range sizes {
		slices.SortFunc(sizes[b], func(x, y int) int { return y - x })
	}
	if want != nil {
		for k := range want {
			if !seen[k] {
				t.Errorf("blob %s never sent", k)
			}
		}
		for k := range seen {
			if !want[k] {
				t.Errorf("blob %s sent, never handed to the queue", k)
			}
		}
	}
	return sizes
}

// queuedKeys is the set of the keys of the blobs of pages.
func queuedKeys(pages [][]armed) map[string]bool {
	keys := map[string]bool{}
	for _, p := range pages {
		for _, a := range p {
			keys[a.tomb.Key] = true
		}
	}
	return keys
}

// finishAll finishes without error every request in flight, oldest
// first.
func (q *queueFake) finishAll() {
	for {
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.mu.Unlock()
			return
		}
		key := q.waiting[0].batch[0].tomb.Key
		q.mu.Unlock()
		q.finish(key, nil)
	}
}

// TestDeletesParallelBound: with digests.delete_parallel requests in
// flight the queue sends no other: the pass's goroutine waits in add,
// flushAll or wait, and each request that finishes lets exactly one more
// start.
func TestDeletesParallelBound(t *testing.T) {
	for _, parallel := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("parallel %d", parallel), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				testParallelBound(t, parallel)
			})
		})
	}
}

func testParallelBound(t *testing.T, parallel int) {
	ctx := t.Context()
	q := newQueueFake(t)
	d := newDeletes(parallel, q.del, q.past)
	// Seven requests: six full ones sent from add as pages of 500 fill
	// them, and a short one of 300 sent by flushAll.
	const requests = 7
	var pages [][]armed
	for range 12 {
		pages = append(pages, q.newBlobs("a", 500))
	}
	pages = append(pages, q.newBlobs("a", 300))
	done := make(chan error, 1)
	go func() {
		for i, p := range pages {
			if err := q.add(ctx, d, queuePageKey(i), p); err != nil {
				done <- err
				return
			}
		}
		d.flushAll(ctx)
		done <- d.wait(ctx)
	}()
	for finished := range requests {
		synctest.Wait()
		waiting, sent := q.inFlight()
		if want := min(parallel, requests-finished); waiting != want || sent != finished+want {
			t.Fatalf("%d requests finished: %d in flight and %d sent, want %d in flight and %d sent",
				finished, waiting, sent, want, finished+want)
		}
		q.mu.Lock()
		oldest := q.waiting[0].batch[0].tomb.Key
		q.mu.Unlock()
		q.finish(oldest, nil)
	}
	if err := <-done; err != nil {
		t.Fatalf("pass: %v", err)
	}
	if waiting, sent := q.inFlight(); waiting != 0 || sent != requests {
		t.Errorf("after the pass: %d in flight and %d sent, want 0 and %d", waiting, sent, requests)
	}
	if got, want := q.cursor(), queuePageKey(len(pages)-1); got != want {
		t.Errorf("cursor after the pass = %q, want %q", got, want)
	}
}

// TestDeletesCursorInPageOrder: the cursor moves past a page only once
// every blob of that page and of every page before it is settled, however
// the requests finish; an empty page is passed with the pages before it.
// Each time the queue looks (add, wait), the cursor goes as far as that
// allows.
func TestDeletesCursorInPageOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := newQueueFake(t)
		d := newDeletes(8, q.del, q.past)
		look := func(step string, err error, want int) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			if got := q.cursor(); got != queuePageKey(want) {
				t.Errorf("%s: cursor past %q, want %q", step, got, queuePageKey(want))
			}
		}
		// Page 0 is empty, page 1 has two requests of its own, page 2 is
		// empty, pages 3 and 4 share a request of bucket c, and page 5
		// has a request of its own and one blob in a request of bucket e
		// with page 6.
		a, b := q.newBlobs("a", maxDeleteKeys), q.newBlobs("b", maxDeleteKeys)
		c3, c4, d4 := q.newBlobs("c", 600), q.newBlobs("c", 400), q.newBlobs("d", 10)
		f5, e5, e6 := q.newBlobs("f", maxDeleteKeys), q.newBlobs("e", 1), q.newBlobs("e", 5)
		look("add page 0", q.add(ctx, d, queuePageKey(0), nil), 0)
		look("add page 1", q.add(ctx, d, queuePageKey(1), slices.Concat(a, b)), 0)
		look("add page 2", q.add(ctx, d, queuePageKey(2), nil), 0)
		look("add page 3", q.add(ctx, d, queuePageKey(3), c3), 0)
		look("add page 4", q.add(ctx, d, queuePageKey(4), slices.Concat(d4, c4)), 0)
		look("add page 5", q.add(ctx, d, queuePageKey(5), slices.Concat(e5, f5)), 0)
		look("add page 6", q.add(ctx, d, queuePageKey(6), e6), 0)
		d.flushAll(ctx)
		synctest.Wait()
		q.finish(d4[0].tomb.Key, nil)
		look("page 4's own request done", d.advance(ctx), 0)
		q.finish(c3[0].tomb.Key, nil)
		look("pages 3 and 4 done", d.advance(ctx), 0)
		q.finish(b[0].tomb.Key, nil)
		look("half of page 1 done", d.advance(ctx), 0)
		q.finish(a[0].tomb.Key, nil)
		look("pages 1 to 4 done", d.advance(ctx), 4)
		q.finish(f5[0].tomb.Key, nil)
		look("page 5 done but one blob", d.advance(ctx), 4)
		q.finish(e5[0].tomb.Key, nil)
		look("every request done", d.wait(ctx), 6)
	})
}

// TestDeletesCursorRandomOrder: pages of blobs of a few buckets, their
// requests finishing in a random order while later pages are added; each
// time the queue looks, the cursor is exactly past the leading pages
// whose blobs are all settled (queueFake.past checks it never passes a
// page that is not, nor moves back).
func TestDeletesCursorRandomOrder(t *testing.T) {
	for seed := range uint64(16) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				testCursorRandomOrder(t, rand.New(rand.NewPCG(seed, 1)))
			})
		})
	}
}

func testCursorRandomOrder(t *testing.T, rnd *rand.Rand) {
	ctx := t.Context()
	q := newQueueFake(t)
	d := newDeletes(64, q.del, q.past)
	look := func(step string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got, want := q.cursor(), q.furthest(); got != want {
			t.Fatalf("%s: cursor past %q, want %q", step, got, want)
		}
	}
	// finishSome finishes up to n requests in flight, chosen at random,
	// letting the queue look after some of them.
	finishSome := func(n int) {
		for range n {
			q.mu.Lock()
			if len(q.waiting) == 0 {
				q.mu.Unlock()
				return
			}
			key := q.waiting[rnd.IntN(len(q.waiting))].batch[0].tomb.Key
			q.mu.Unlock()
			q.finish(key, nil)
			if rnd.IntN(2) == 0 {
				look("advance after "+key, d.advance(ctx))
			}
		}
	}
	const pages = 10
	for i := range pages {
		var blobs []armed
		for _, b := range []string{"a", "b", "c"} {
			// Few blobs as often as many, so that some request holds
			// one or two blobs of a page.
			switch rnd.IntN(4) {
			case 1:
				blobs = append(blobs, q.newBlobs(b, 1+rnd.IntN(3))...)
			case 2, 3:
				blobs = append(blobs, q.newBlobs(b, 1+rnd.IntN(900))...)
			}
		}
		rnd.Shuffle(len(blobs), func(i, j int) { blobs[i], blobs[j] = blobs[j], blobs[i] })
		look("add "+queuePageKey(i), q.add(ctx, d, queuePageKey(i), blobs))
		synctest.Wait()
		finishSome(rnd.IntN(3))
	}
	d.flushAll(ctx)
	synctest.Wait()
	finishSome(1 << 30)
	look("wait", d.wait(ctx))
	if got, want := q.cursor(), queuePageKey(pages-1); got != want {
		t.Errorf("cursor after every request = %q, want %q", got, want)
	}
}

// TestDeletesStopAfterFailure: once a request fails, the cursor stays
// where it is for the rest of the pass, even past pages whose blobs are
// all settled; add and the queue's every later look return the error, and
// wait returns the first request's error, not a later one's.
func TestDeletesStopAfterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		q := newQueueFake(t)
		d := newDeletes(8, q.del, q.past)
		errFirst, errLater := errors.New("fake: first failure"), errors.New("fake: later failure")
		var first []string
		for i, b := range []string{"a", "b", "c", "d", "e"} {
			blobs := q.newBlobs(b, maxDeleteKeys)
			first = append(first, blobs[0].tomb.Key)
			if err := q.add(ctx, d, queuePageKey(i), blobs); err != nil {
				t.Fatalf("add page %d: %v", i, err)
			}
		}
		synctest.Wait()
		q.finish(first[0], nil)
		if err := d.advance(ctx); err != nil || q.cursor() != queuePageKey(0) {
			t.Fatalf("page 0 done: advance = %v, cursor past %q; want nil, %q", err, q.cursor(), queuePageKey(0))
		}
		q.finish(first[2], errFirst)
		q.finish(first[1], nil)
		if err := d.advance(ctx); !errors.Is(err, errFirst) {
			t.Errorf("page 1 done after page 2 failed: advance = %v, want %v", err, errFirst)
		}
		late := q.newBlobs("f", maxDeleteKeys)
		if err := q.add(ctx, d, queuePageKey(5), late); !errors.Is(err, errFirst) {
			t.Errorf("add after a failure = %v, want %v", err, errFirst)
		}
		synctest.Wait()
		q.finish(first[3], errLater)
		q.finish(first[4], nil)
		q.finish(late[0].tomb.Key, nil)
		if err := d.wait(ctx); !errors.Is(err, errFirst) {
			t.Errorf("wait = %v, want the first failure %v", err, errFirst)
		}
		if got := q.cursor(); got != queuePageKey(0) {
			t.Errorf("cursor past %q after the failure, want it left past %q", got, queuePageKey(0))
		}
	})
}
