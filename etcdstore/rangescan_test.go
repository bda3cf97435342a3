//go:build integration

package etcdstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// countingKV records the Count of every range request: the keys etcd's
// index counted to answer it, whatever its limit.
type countingKV struct {
	clientv3.KV
	mu     sync.Mutex
	counts []int64
}

func (k *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := k.KV.Get(ctx, key, opts...)
	if err == nil {
		k.mu.Lock()
		k.counts = append(k.counts, resp.Count)
		k.mu.Unlock()
	}
	return resp, err
}

// countRequests makes st's reads go through a countingKV.
func countRequests(st *Store) *countingKV {
	c := &countingKV{KV: st.cli.KV}
	st.cli.KV = c
	return c
}

// putAll writes each key (value: the key) in transactions of maxTxnOps.
func putAll(t *testing.T, st *Store, keys []string) {
	t.Helper()
	for len(keys) > 0 {
		batch := keys[:min(len(keys), maxTxnOps)]
		keys = keys[len(batch):]
		ops := make([]clientv3.Op, len(batch))
		for i, k := range batch {
			ops[i] = clientv3.OpPut(k, k)
		}
		if _, err := st.cli.Txn(t.Context()).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// scanKeys runs rangeScan over prefix and returns the keys in the order
// they came; during is called once, after the first key.
func scanKeys(t *testing.T, st *Store, prefix string, page int64, during func()) ([]string, int64) {
	t.Helper()
	var got []string
	rev, err := st.rangeScan(t.Context(), prefix, clientv3.GetPrefixRangeEnd(prefix), 0, page, func(kv *mvccpb.KeyValue) bool {
		if string(kv.Value) != string(kv.Key) {
			t.Fatalf("key %q holds %q", kv.Key, kv.Value)
		}
		got = append(got, string(kv.Key))
		if len(got) == 1 && during != nil {
			during()
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, rev
}

// uploadIDs returns n ids shaped like MinIO's: a long prefix every id of
// one deployment shares, then random bytes, base64 encoded.
func uploadIDs(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 16)
		for j := range b {
			b[j] = byte(rng.UintN(256))
		}
		out[i] = base64.RawURLEncoding.EncodeToString([]byte("0d3cbd3a-4cd5-4a1c-94e2-7a0c1b2ff3d1." + string(b)))
	}
	return out
}

// TestRangeScanOrderAndRevision: a scan over dense, sparse and raw-byte
// keys returns exactly the keys of its first revision, in key order, while
// keys are written and deleted in its range as it runs.
func TestRangeScanOrderAndRevision(t *testing.T) {
	t.Parallel()
	st := newMetricsTestStore(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const prefix = "/test/scan/"
	var keys []string
	for _, id := range uploadIDs(rng, 3000) { // dense
		keys = append(keys, prefix+"d/"+id)
	}
	for i := range 40 { // sparse: far apart in the key space
		keys = append(keys, fmt.Sprintf("%ss%c/%d", prefix, 'A'+i, i*7919))
	}
	for b := range 256 { // every byte value, alone and in runs
		keys = append(keys, prefix+"r"+string([]byte{byte(b)}))
		keys = append(keys, prefix+"r"+strings.Repeat(string([]byte{byte(b)}), 3))
	}
	keys = append(keys, prefix+"\xff\xff\xff\xff", prefix+"\x00", prefix)
	putAll(t, st, keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)

	got, rev := scanKeys(t, st, prefix, 50, func() {
		// After the scan's revision: none of this may show.
		putAll(t, st, []string{prefix + "d/new", prefix + "r\x80\x80", prefix + "zz"})
		if _, err := st.cli.Delete(t.Context(), keys[len(keys)/2]); err != nil {
			t.Fatal(err)
		}
	})
	if !slices.Equal(got, keys) {
		t.Fatalf("scan returned %d keys, want %d in key order; first difference at %d", len(got), len(keys), firstDiff(got, keys))
	}
	if rev == 0 {
		t.Fatal("no revision")
	}
	// Page sizes that do not divide anything, down to one key a request,
	// over the sparse and raw-byte keys.
	for _, page := range []int64{1, 7, 333} {
		for _, sub := range []string{prefix + "r", prefix + "s"} {
			resp, err := st.cli.Get(t.Context(), sub, clientv3.WithPrefix(), clientv3.WithRev(rev))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, kv := range resp.Kvs {
				want = append(want, string(kv.Key))
			}
			var at []string
			if _, err := st.rangeScan(t.Context(), sub, clientv3.GetPrefixRangeEnd(sub), rev, page, func(kv *mvccpb.KeyValue) bool {
				at = append(at, string(kv.Key))
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(at, want) {
				t.Fatalf("%q, page %d at revision %d: %d keys, want %d; first difference at %d", sub, page, rev, len(at), len(want), firstDiff(at, want))
			}
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestRangeScanCost: etcd counts every key of a range request's range,
// whatever its limit, so paging M keys with one fixed end counts about
// M²/(2·page). The scan's requests must count a bounded number of keys per
// key read, the same at 4,000 and at 20,000 keys: over uploads shaped like
// MinIO's (a long prefix every id shares, then random characters) and over
// a mix of dense and sparse prefixes.
func TestRangeScanCost(t *testing.T) {
	t.Parallel()
	st := newMetricsTestStore(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const page = 100
	var keys []string
	for _, n := range []int{4000, 20000} {
		for _, id := range uploadIDs(rng, n) {
			keys = append(keys, fmt.Sprintf("/test/uniform%d/b/%s", n, id))
		}
		for i, id := range uploadIDs(rng, n*4/5) {
			keys = append(keys, fmt.Sprintf("/test/mixed%d/dense%d/%s", n, i%3, id))
		}
		for i := range n / 5 {
			keys = append(keys, fmt.Sprintf("/test/mixed%d/sparse/%c%d/%x", n, 'a'+i%26, i, rng.Uint64()))
		}
	}
	putAll(t, st, keys)
	c := countRequests(st)
	perKey := func(prefix string, n int) float64 {
		c.counts = nil
		if got, _ := scanKeys(t, st, prefix, page, nil); len(got) != n {
			t.Fatalf("%s: %d keys, want %d", prefix, len(got), n)
		}
		var total int64
		for _, k := range c.counts {
			total += k
		}
		per := float64(total) / float64(n)
		t.Logf("%s: %d keys read, %d requests, %.2f keys counted per key read", prefix, n, len(c.counts), per)
		if per > 5 {
			t.Errorf("%s: %.1f keys counted per key read, want at most 5", prefix, per)
		}
		return per
	}
	for _, shape := range []string{"uniform", "mixed"} {
		small, large := perKey("/test/"+shape+"4000/", 4000), perKey("/test/"+shape+"20000/", 20000)
		if large > 1.3*small {
			t.Errorf("%s: %.2f keys counted per key read at 20,000 keys against %.2f at 4,000: the scan's cost grows faster than its keys", shape, large, small)
		}
	}
}

// TestScanSessionsEveryByte: upload ids holding every character from 0 to
// 255 (a record holds UTF-8, so the key holds every byte the escaping
// writes) come back in key order, and a scan resumed after any of them returns exactly the
// ones after it.
func TestScanSessionsEveryByte(t *testing.T) {
	t.Parallel()
	st := newMetricsTestStore(t)
	ctx := t.Context()
	var ids []string
	for b := range 256 {
		ids = append(ids, string(rune(b)), string([]rune{rune(b), 0xff, rune(b)}))
	}
	for _, id := range ids {
		if _, err := st.CreateSession(ctx, &Session{Bucket: "b", UploadID: id, State: StateActive}); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		return strings.Compare(st.keys.Session("b", a), st.keys.Session("b", b))
	})
	scan := func(after string) []string {
		var got []string
		_, bad, err := st.ScanSessionsAfter(ctx, SessionScan{Bucket: "b", AfterBucket: "b", AfterUploadID: after, PageSize: 16}, func(v Versioned[Session]) bool {
			got = append(got, v.Value.UploadID)
			return true
		})
		if err != nil || len(bad) > 0 {
			t.Fatalf("scan after %q: %v, undecodable %v", after, err, bad)
		}
		return got
	}
	if got := scan(""); !slices.Equal(got, ids) {
		t.Fatalf("scan: %d ids, want %d in key order; first difference at %d", len(got), len(ids), firstDiff(got, ids))
	}
	for i := 0; i < len(ids); i += 37 {
		if got := scan(ids[i]); !slices.Equal(got, ids[i+1:]) {
			t.Fatalf("scan after %q: %d ids, want %d; first difference at %d", ids[i], len(got), len(ids)-i-1, firstDiff(got, ids[i+1:]))
		}
	}
	resp, err := st.cli.Get(ctx, "health")
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	if err := st.ScanSessionsAt(ctx, "b", resp.Header.Revision, 16, func(v Versioned[Session]) error {
		at = append(at, v.Value.UploadID)
		return nil
	}); err != nil || !slices.Equal(at, ids) {
		t.Fatalf("ScanSessionsAt: %v, %d ids, want %d", err, len(at), len(ids))
	}
	// Skipping every other id by the id its key names leaves the rest.
	var odd, rest []string
	for i, id := range ids {
		if i%2 == 1 {
			odd = append(odd, id)
		} else {
			rest = append(rest, id)
		}
	}
	at = nil
	if err := st.ScanSessionsExceptAt(ctx, "b", resp.Header.Revision, 16, func(id string) bool {
		_, ok := slices.BinarySearchFunc(odd, id, func(a, b string) int {
			return strings.Compare(st.keys.Session("b", a), st.keys.Session("b", b))
		})
		return ok
	}, func(v Versioned[Session]) error {
		at = append(at, v.Value.UploadID)
		return nil
	}); err != nil || !slices.Equal(at, rest) {
		t.Fatalf("ScanSessionsExceptAt: %v, %d ids, want %d; first difference at %d", err, len(at), len(rest), firstDiff(at, rest))
	}
}
