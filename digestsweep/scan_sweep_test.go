//go:build integration

package digestsweep

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestCollectorPagesAgainstRangeRead: the collector, resumed after a
// tombstone, visits exactly the tombstones after it, each once, in pages of
// at most the batch that cover them in key order: every guard on one of
// them that no ready tombstone needs is released, every other guard stays,
// and etcd counts a bounded number of keys per tombstone and guard read.
func TestCollectorPagesAgainstRangeRead(t *testing.T) {
	t.Parallel()
	cli, c, keys := scanEtcd(t)
	ctx := t.Context()
	now := time.Unix(1700000000, 0).UTC()
	const batch = 100
	digests := testDigests(6000)
	var kvs []string
	for i, d := range digests {
		// Not ready in this pass: a guard on one is released.
		tomb := etcdstore.Tombstone{Digest: d, State: etcdstore.TombstonePending, Pass: 1, Since: now}
		kvs = append(kvs, keys.Tombstone(d), etcdstore.MarshalRecord(tomb))
		if i%3 == 0 {
			kvs = append(kvs, keys.Guard(d), etcdstore.MarshalRecord(etcdstore.Guard{Digest: d, Pass: 1, At: now}))
		}
	}
	for i := range 300 { // guards with no tombstone: the collector never sees them
		d := fmt.Sprintf("sha256:orphan%d", i)
		kvs = append(kvs, keys.Guard(d), etcdstore.MarshalRecord(etcdstore.Guard{Digest: d, Pass: 1, At: now}))
	}
	putKVs(t, cli, kvs...)
	tombs := keysOf(rangeRead(t, cli, keys.Tombstones(), 0))
	guards := keysOf(rangeRead(t, cli, keys.Guards(), 0))
	resume := len(tombs) / 7

	s := newScanSweep(t, cli, keys, batch, now)
	s.cur.Collect = tombs[resume]
	var ends []string
	s.run.Fault = func(point string) {
		if point == FaultCollected {
			ends = append(ends, s.cur.Collect)
		}
	}
	c.take()
	if err := s.collect(ctx); err != nil {
		t.Fatal(err)
	}
	left := keysOf(rangeRead(t, cli, keys.Guards(), 0))
	checkCounted(t, fmt.Sprintf("collector over %d tombstones", len(tombs)-resume-1), c.take(), len(tombs)-resume-1+len(guards)-len(left))

	visited := map[string]bool{}
	for _, k := range tombs[resume+1:] {
		d, _ := etcdstore.LastSegment(k)
		visited[d] = true
	}
	var want []string
	for _, k := range guards {
		if d, _ := etcdstore.LastSegment(k); !visited[d] {
			want = append(want, k)
		}
	}
	if !slices.Equal(left, want) {
		t.Fatalf("%d guards left, want %d (the collector missed or strayed beyond tombstones); first difference at %d", len(left), len(want), firstDiff(left, want))
	}
	if released := int64(len(guards) - len(left)); s.cur.Report.Released != released || s.cur.Report.Changed != 0 {
		t.Errorf("report: %d released, %d changed; want %d released, none changed (a tombstone visited twice fails its release)", s.cur.Report.Released, s.cur.Report.Changed, released)
	}
	// The pages follow one another after the resumed cursor, hold at most
	// a batch each and end at the last tombstone.
	at := resume
	for _, end := range ends {
		i, ok := slices.BinarySearch(tombs, end)
		if !ok || i <= at || i-at > batch {
			t.Fatalf("a page ends at %q (%d), after the page that ended at %d: want a tombstone at most %d further", end, i, at, batch)
		}
		at = i
	}
	if at != len(tombs)-1 {
		t.Fatalf("the last page ends at tombstone %d of %d", at, len(tombs))
	}
}

// TestCheckTimesAgainstRangeRead: checkTimes stamps every trash record no
// pass stamped yet, and its trash references, leaves stamped ones alone,
// and counts exactly the trash records and tombstones whose time lies in
// the future, over thousands of each with buckets and keys holding unusual
// bytes, while etcd counts a bounded number of keys per record read.
func TestCheckTimesAgainstRangeRead(t *testing.T) {
	t.Parallel()
	cli, c, keys := scanEtcd(t)
	ctx := t.Context()
	now := time.Unix(1700000000, 0).UTC()
	future := now.Add(time.Hour)
	const window = 24 * time.Hour
	stamped := 5 * time.Minute
	var (
		kvs     []string
		futures int64
	)
	digests := testDigests(20000)
	for i := range 5000 {
		deleted := now.Add(-time.Duration(i) * time.Second)
		if i%50 == 0 {
			deleted, futures = future, futures+1
		}
		tr := etcdstore.TrashRecord{Bucket: fmt.Sprintf("b%c", rune(i%256)), Key: fmt.Sprintf("o/\x00%c %d", rune(i%300), i),
			Digests: []string{digests[i], digests[i+1]}, DeletedAt: deleted, Expires: deleted.Add(window)}
		if i%4 == 0 {
			tr.ExpiresElapsed = &stamped
		}
		kvs = append(kvs, keys.Trash(tr.Bucket, tr.Key, tr.DeletedAt), etcdstore.MarshalRecord(tr))
	}
	for i, d := range digests {
		tomb := etcdstore.Tombstone{Digest: d, State: etcdstore.TombstoneDeleted, Since: now}
		if i%40 == 0 {
			tomb.Since, futures = future, futures+1
		}
		kvs = append(kvs, keys.Tombstone(d), etcdstore.MarshalRecord(tomb))
	}
	putKVs(t, cli, kvs...)
	before := rangeRead(t, cli, keys.AllTrash(), 0)
	read := len(before) + len(rangeRead(t, cli, keys.Tombstones(), 0))

	s := newScanSweep(t, cli, keys, 1000, now)
	c.take()
	if err := s.checkTimes(ctx); err != nil {
		t.Fatal(err)
	}
	checkCounted(t, fmt.Sprintf("checkTimes over %d records", read), c.take(), read)
	if s.cur.Report.FutureTimes != futures {
		t.Errorf("%d records counted with a future time, want %d", s.cur.Report.FutureTimes, futures)
	}
	after := rangeRead(t, cli, keys.AllTrash(), 0)
	if !slices.Equal(keysOf(after), keysOf(before)) {
		t.Fatalf("trash keys changed: %d, want %d", len(after), len(before))
	}
	refs := map[string]etcdstore.TrashRef{}
	for _, kv := range rangeRead(t, cli, keys.AllTrashRefs(), 0) {
		var r etcdstore.TrashRef
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			t.Fatal(err)
		}
		refs[string(kv.Key)] = r
	}
	newly := 0
	for i, kv := range after {
		var was, is etcdstore.TrashRecord
		if err := json.Unmarshal(before[i].Value, &was); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(kv.Value, &is); err != nil {
			t.Fatal(err)
		}
		want := was.Expires.Sub(was.DeletedAt) + s.run.Elapsed
		if was.ExpiresElapsed != nil {
			want = *was.ExpiresElapsed
		} else {
			newly++
			for _, d := range was.Digests {
				r, ok := refs[keys.TrashRef(d, was.Bucket, was.Key, was.DeletedAt)]
				if !ok || r.ExpiresElapsed == nil || *r.ExpiresElapsed != want {
					t.Fatalf("trash reference of %s to %s: %+v, want one expiring at elapsed %s", strings.ToValidUTF8(string(kv.Key), "?"), d, r, want)
				}
			}
		}
		if is.ExpiresElapsed == nil || *is.ExpiresElapsed != want {
			t.Fatalf("trash %q expires at elapsed %v, want %s", kv.Key, is.ExpiresElapsed, want)
		}
	}
	if len(refs) != 2*newly {
		t.Errorf("%d trash references written, want %d (two for each of %d records stamped)", len(refs), 2*newly, newly)
	}
}
