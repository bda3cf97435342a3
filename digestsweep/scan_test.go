//go:build integration

package digestsweep

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/sweep"
)

// The digest sweep's scans read bounded stretches of a prefix (see
// etcdstore.RangePager), because etcd v3.6 counts every key of a range
// request's range whatever its limit. Each test here holds one scan to a
// plain full range read of the same keys (the oracle), and to a bound on
// the keys etcd counted per key read: paging the same keys with one fixed
// end counts about keys/(2·page) per key read, far above it.

// maxCountedPerKey bounds the keys etcd may count per key a scan reads.
const maxCountedPerKey = 5

// countingKV sums the Count of every range request: the keys etcd's index
// counted to answer it.
type countingKV struct {
	clientv3.KV
	mu      sync.Mutex
	counted int64
}

func (k *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := k.KV.Get(ctx, key, opts...)
	if err == nil {
		k.mu.Lock()
		k.counted += resp.Count
		k.mu.Unlock()
	}
	return resp, err
}

// take returns the keys counted since the last take.
func (k *countingKV) take() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.counted
	k.counted = 0
	return n
}

// scanEtcd starts an etcd whose client counts the keys its reads count.
func scanEtcd(t *testing.T) (*clientv3.Client, *countingKV, etcdstore.Keys) {
	t.Helper()
	_, cli := etcdtest.Start(t)
	c := &countingKV{KV: cli.KV}
	cli.KV = c
	keys, err := etcdstore.NewKeys("/sweepgate-test/")
	if err != nil {
		t.Fatal(err)
	}
	return cli, c, keys
}

// putKVs writes kvs (key, value, key, value, ...) in transactions of 128.
func putKVs(t *testing.T, cli *clientv3.Client, kvs ...string) {
	t.Helper()
	for len(kvs) > 0 {
		n := min(len(kvs), 2*128)
		ops := make([]clientv3.Op, 0, n/2)
		for i := 0; i < n; i += 2 {
			ops = append(ops, clientv3.OpPut(kvs[i], kvs[i+1]))
		}
		if _, err := cli.Txn(t.Context()).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		kvs = kvs[n:]
	}
}

// testDigests returns n digests shaped like sha256 ones, then digests
// holding every byte (escaped in a key), sorted by key.
func testDigests(n int) []string {
	var out []string
	for i := range n {
		sum := sha256.Sum256(fmt.Appendf(nil, "blob %d", i))
		out = append(out, "sha256:"+hex.EncodeToString(sum[:]))
	}
	for b := range 256 {
		out = append(out, "x:"+string([]byte{byte(b)}), "sha256:"+strings.Repeat(string([]byte{byte(b)}), 3))
	}
	return out
}

// rangeRead is the oracle: every key under prefix in one plain request, at
// rev (latest when 0).
func rangeRead(t *testing.T, cli *clientv3.Client, prefix string, rev int64) []*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs
}

func keysOf(kvs []*mvccpb.KeyValue) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = string(kv.Key)
	}
	return out
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkCounted fails t when etcd counted more than maxCountedPerKey keys
// per key read.
func checkCounted(t *testing.T, what string, counted int64, read int) {
	t.Helper()
	per := float64(counted) / float64(max(read, 1))
	t.Logf("%s: %d keys read, %.2f keys counted per key read", what, read, per)
	if per > maxCountedPerKey {
		t.Errorf("%s: etcd counted %.1f keys per key read, want at most %d: the scan's cost grows with the square of its keys", what, per, maxCountedPerKey)
	}
}

// TestSweepScanAgainstRangeRead: sweepScan returns exactly the keys of a
// plain range read, in order, from the start and resumed after any key,
// over sha256 digests and digests holding every byte (escaped in the key),
// counting a bounded number of keys per key read at 4,000 and at 20,000
// keys, and over keys holding raw bytes (no key of ours does). It reads
// the latest revision request by request: a key written ahead of it during
// the scan is read, one deleted ahead of it is not.
func TestSweepScanAgainstRangeRead(t *testing.T) {
	t.Parallel()
	cli, c, keys := scanEtcd(t)
	ctx := t.Context()
	const page = 100
	scan := func(start, end string, during func()) []string {
		var got []string
		if err := sweepScan(ctx, cli, start, end, page, func(kv *mvccpb.KeyValue, _ int64) error {
			got = append(got, string(kv.Key))
			if len(got) == 1 && during != nil {
				during()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	check := func(prefix string, want []string) {
		t.Helper()
		if got := scan(prefix, clientv3.GetPrefixRangeEnd(prefix), nil); !slices.Equal(got, want) {
			t.Fatalf("%d keys, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
		}
		for i := 0; i < len(want); i += len(want)/13 + 1 {
			if got := scan(want[i]+"\x00", clientv3.GetPrefixRangeEnd(prefix), nil); !slices.Equal(got, want[i+1:]) {
				t.Fatalf("resumed after %q: %d keys, want %d; first difference at %d", want[i], len(got), len(want)-i-1, firstDiff(got, want[i+1:]))
			}
		}
	}
	for _, n := range []int{4000, 20000} {
		prefix := keys.Tombstones() + fmt.Sprint(n) + "/"
		var kvs []string
		for _, d := range testDigests(n) {
			kvs = append(kvs, prefix+strings.TrimPrefix(keys.Tombstone(d), keys.Tombstones()), d)
		}
		putKVs(t, cli, kvs...)
		want := keysOf(rangeRead(t, cli, prefix, 0))
		c.take()
		got := scan(prefix, clientv3.GetPrefixRangeEnd(prefix), nil)
		checkCounted(t, fmt.Sprintf("sweepScan over %d keys", len(want)), c.take(), len(got))
		check(prefix, want)
	}

	prefix := keys.Guards()
	var kvs []string
	for _, d := range testDigests(2000) {
		kvs = append(kvs, keys.Guard(d), d)
	}
	for b := range 256 {
		kvs = append(kvs, prefix+"r"+string([]byte{byte(b)}), "raw", prefix+"r"+strings.Repeat(string([]byte{byte(b)}), 3), "raw")
	}
	kvs = append(kvs, prefix, "the prefix itself", prefix+"\xff\xff", "raw")
	putKVs(t, cli, kvs...)
	want := keysOf(rangeRead(t, cli, prefix, 0))
	check(prefix, want)
	gone, added := want[len(want)-3], prefix+"\xfe"
	got := scan(prefix, clientv3.GetPrefixRangeEnd(prefix), func() {
		if _, err := cli.Delete(ctx, gone); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, added, "new"); err != nil {
			t.Fatal(err)
		}
	})
	want = append(slices.DeleteFunc(want, func(k string) bool { return k == gone }), added)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("with a key written and one deleted ahead of the scan: %d keys, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

// TestDigestRangeAgainstRangeRead: digestRange at the pass revision calls
// fn for exactly the keys a plain range read at that revision holds under
// the digests asked about, in key order, skipping the rest of a digest
// once fn says done, over sha256 digests and digests holding every byte;
// keys written after the revision do not show; etcd counts a bounded
// number of keys per key in the range.
func TestDigestRangeAgainstRangeRead(t *testing.T) {
	t.Parallel()
	cli, c, keys := scanEtcd(t)
	ctx := t.Context()
	all := testDigests(12000)
	at := time.Unix(1700000000, 0).UTC()
	var kvs []string
	for i, d := range all {
		for j := range 1 + i%4 {
			bucket, key := "b", fmt.Sprintf("o\x00%c/ü%d", rune(i%256), j)
			kvs = append(kvs, keys.TrashRef(d, bucket, key, at.Add(time.Duration(j))), fmt.Sprintf("%s %d", d, j))
		}
	}
	putKVs(t, cli, kvs...)
	oracle := rangeRead(t, cli, keys.AllTrashRefs(), 0)
	rev := oracle[0].ModRevision
	for _, kv := range oracle {
		rev = max(rev, kv.ModRevision)
	}
	// The digests asked about in listing order, as the pages of a
	// namespace's listing give them.
	var asked []string
	for i, d := range all {
		if i%2 == 0 {
			asked = append(asked, d)
		}
	}
	asked = append(asked, "sha256:none", "zz:none")
	slices.SortFunc(asked, func(a, b string) int { return strings.Compare(keys.TrashRefs(a), keys.TrashRefs(b)) })
	// After the revision: none of this may show.
	putKVs(t, cli, keys.TrashRef(asked[1], "b", "later", at), "later", keys.TrashRef("sha256:none", "b", "later", at), "later")

	done := func(d string) bool { return d[len(d)-1]%2 == 0 }
	wanted := map[string]bool{}
	for _, d := range asked {
		wanted[d] = true
	}
	var want []string
	first, last := keys.TrashRefs(asked[0]), clientv3.GetPrefixRangeEnd(keys.TrashRefs(asked[len(asked)-1]))
	inRange, seen := 0, map[string]bool{}
	for _, kv := range oracle {
		k := string(kv.Key)
		if k >= first && k < last {
			inRange++
		}
		d, ok := digestOfKey(k, keys.TrashRefs)
		if !ok || !wanted[d] || seen[d] {
			continue
		}
		want = append(want, d+"="+string(kv.Value))
		seen[d] = done(d)
	}
	for _, page := range []int{len(asked), 1000} { // the whole set, and listing pages of it
		var got []string
		c.take()
		for p := 0; p < len(asked); p += page {
			err := digestRange(ctx, cli, rev, asked[p:min(p+page, len(asked))], keys.TrashRefs, false, func(d string, v []byte) (bool, error) {
				got = append(got, d+"="+string(v))
				return done(d), nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		checkCounted(t, fmt.Sprintf("digestRange, %d digests a call, over %d keys", page, inRange), c.take(), inRange)
		if !slices.Equal(got, want) {
			t.Fatalf("%d digests a call: %d keys passed, want %d; first difference at %d", page, len(got), len(want), firstDiff(got, want))
		}
	}
}

// newScanSweep returns the digest sweep of pass 1 over cli, fenced by a
// term of its own, with pages of batch keys, the clock at now.
func newScanSweep(t *testing.T, cli *clientv3.Client, keys etcdstore.Keys, batch int, now time.Time) *digestSweep {
	t.Helper()
	resp, err := cli.Put(t.Context(), keys.Root()+"test-term", "")
	if err != nil {
		t.Fatal(err)
	}
	term := sweep.Term{N: resp.Header.Revision, Key: keys.Root() + "test-term"}
	sw := &Sweep{cfg: &SweepConfig{DeleteParallel: 1}, store: etcdstore.NewStore(cli, keys),
		log: slog.New(slog.DiscardHandler), metrics: noMetrics{}, batch: batch}
	run := &sweep.Run{Term: term, Pass: 1, Now: now, Clock: func() time.Time { return now }, ClockSkew: time.Minute, Elapsed: time.Hour}
	return &digestSweep{Sweep: sw, run: run, term: term, now: now, cur: digestCursor{Pass: 1, Term: term.N, Phase: digestPhaseCollect}}
}
