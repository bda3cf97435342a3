//go:build integration

package digestsweep

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/sweep"
)

// TestCommitParallel holds commitParallel, which has several transactions
// in flight at once, to what commit guarantees: each write lands exactly
// when its own comparisons hold, whatever transaction it shares, landed
// and revs say which and at what revision, and a term that is over writes
// nothing.
func TestCommitParallel(t *testing.T) {
	ctx := t.Context()
	_, cli := etcdtest.Start(t)
	keys, err := etcdstore.NewKeys("/sweepgate-test/")
	if err != nil {
		t.Fatal(err)
	}
	s := newScanSweep(t, cli, keys, 1000, time.Now())
	// Writes of five comparisons each, as an arm compares: 24 to a
	// transaction, so 600 writes take 25 transactions. One key in seven
	// exists already, so its write's comparison fails and its
	// transaction is retried write by write.
	const n = 600
	key := func(i int) string { return fmt.Sprintf("%sparallel/%04d", keys.Root(), i) }
	writes := make([]digestWrite, n)
	for i := range writes {
		k := key(i)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0)}
		for c := range 4 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(fmt.Sprintf("%sabsent/%d/%d", keys.Root(), i, c)), "=", 0))
		}
		writes[i] = digestWrite{cmps: cmps, ops: []clientv3.Op{clientv3.OpPut(k, "new")}}
		if i%7 == 3 {
			if _, err := cli.Put(ctx, k, "old"); err != nil {
				t.Fatal(err)
			}
		}
	}
	landed, revs, err := s.commitParallel(ctx, writes)
	if err != nil {
		t.Fatal(err)
	}
	for i := range writes {
		resp, err := cli.Get(ctx, key(i))
		if err != nil {
			t.Fatal(err)
		}
		want := i%7 != 3
		if len(resp.Kvs) == 0 {
			t.Errorf("write %d: landed %v, want %v; etcd holds nothing", i, landed[i], want)
			continue
		}
		kv := resp.Kvs[0]
		switch {
		case landed[i] != want:
			t.Errorf("write %d: landed %v, want %v", i, landed[i], want)
		case want && (string(kv.Value) != "new" || kv.ModRevision != revs[i]):
			t.Errorf("write %d landed at revision %d; etcd holds %q at %d", i, revs[i], kv.Value, kv.ModRevision)
		case !want && string(kv.Value) != "old":
			t.Errorf("write %d whose comparison failed wrote %q", i, kv.Value)
		}
	}

	// A term that is over writes nothing.
	if _, err := cli.Delete(ctx, s.term.Key); err != nil {
		t.Fatal(err)
	}
	for i := range writes {
		writes[i].cmps = writes[i].cmps[1:]
	}
	landed, _, err = s.commitParallel(ctx, writes)
	if !errors.Is(err, sweep.ErrFenced) {
		t.Errorf("commitParallel after the term = %v; want ErrFenced", err)
	}
	resp, err := cli.Get(ctx, keys.Root()+"parallel/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != n {
		t.Fatalf("after the term: %d keys, want %d", len(resp.Kvs), n)
	}
	for i, kv := range resp.Kvs {
		if landed[i] || string(kv.Value) != map[bool]string{true: "old", false: "new"}[i%7 == 3] {
			t.Errorf("after the term: write %d landed %v, %s holds %q", i, landed[i], kv.Key, kv.Value)
		}
	}
}
