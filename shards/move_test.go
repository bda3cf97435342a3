//go:build integration

package shards

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestMove moves a bucket's state from the default shard to another, each
// a real etcd: refused while a gateway is live, resumed over a copy begun
// before, and afterwards every key of the bucket, and only those, is on
// the new shard, the directory names it and the old shard holds none.
func TestMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, cliA := etcdtest.Start(t)
	_, cliB := etcdtest.Start(t)
	keysA, _ := etcdstore.NewKeys("/sg/")
	keysB, _ := etcdstore.NewKeys("/other/")
	a, b := Shard{Name: "main", Cli: cliA, Keys: keysA}, Shard{Name: "logs", Cli: cliB, Keys: keysB}
	put := func(cli *clientv3.Client, key, val string) {
		t.Helper()
		if _, err := cli.Put(ctx, key, val); err != nil {
			t.Fatal(err)
		}
	}
	moving, staying := moveFixture(t, cliA, keysA)
	put(cliA, keysA.ShardBucket("bkt"), "main")
	// A copy begun before: one key already on the new shard.
	put(cliB, keysB.Root()+strings.TrimPrefix(keysA.Session("bkt", "u1"), keysA.Root()), "s1")

	var log []string
	m := &Mover{Shards: []Shard{a, b}, Log: func(f string, args ...any) { log = append(log, f) }}
	p, err := m.Plan(ctx, "bkt", "logs")
	if err != nil {
		t.Fatal(err)
	}
	if p.From != "main" || p.Phase != MoveCopy || p.Keys["sessions"] != 1 || p.Keys["refs"] != 1 || p.Keys["trashrefs"] != 1 || p.Keys["activity"] != 1 {
		t.Errorf("plan = %+v", p)
	}
	if _, err := m.Plan(ctx, "bkt", "nowhere"); err == nil {
		t.Error("Plan to an unknown shard")
	}

	// A live gateway refuses the move, which changes nothing.
	put(cliB, keysB.Gateway("gw1"), "{}")
	if err := m.Apply(ctx, p); err == nil || !strings.Contains(err.Error(), "logs: gw1") {
		t.Errorf("Apply with a live gateway = %v", err)
	}
	if _, err := cliB.Delete(ctx, keysB.Gateway("gw1")); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, p); err != nil {
		t.Fatalf("Apply: %v (%v)", err, log)
	}

	for k, v := range moving {
		nk := keysB.Root() + strings.TrimPrefix(k, keysA.Root())
		if got, _ := cliB.Get(ctx, nk); len(got.Kvs) != 1 || string(got.Kvs[0].Value) != v {
			t.Errorf("%s on the new shard: %v", nk, got.Kvs)
		}
		if got, _ := cliA.Get(ctx, k); len(got.Kvs) != 0 {
			t.Errorf("%s is still on the old shard", k)
		}
	}
	for k, v := range staying {
		if got, _ := cliA.Get(ctx, k); len(got.Kvs) != 1 || string(got.Kvs[0].Value) != v {
			t.Errorf("%s, not the bucket's, changed on the old shard: %v", k, got.Kvs)
		}
	}
	if n, _ := cliB.Get(ctx, keysB.Root(), clientv3.WithPrefix(), clientv3.WithCountOnly()); n.Count != int64(len(moving)) {
		t.Errorf("the new shard holds %d keys, want the %d moved", n.Count, len(moving))
	}
	if got, _ := cliA.Get(ctx, keysA.ShardBucket("bkt")); len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "logs" {
		t.Errorf("directory entry after the move: %v", got.Kvs)
	}
	if got, _ := cliA.Get(ctx, keysA.ShardMove("bkt")); len(got.Kvs) != 0 {
		t.Error("the move record outlived the move")
	}
	if _, err := m.Plan(ctx, "bkt", "logs"); err == nil {
		t.Error("Plan of a bucket already on its shard")
	}

	// Back again, with the new shard holding another value for a key: the
	// copy stops rather than overwrite it, and the directory is unchanged.
	put(cliA, keysA.Session("bkt", "u1"), "different")
	p, err = m.Plan(ctx, "bkt", "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, p); err == nil || !strings.Contains(err.Error(), "another value") {
		t.Errorf("Apply over a conflicting key = %v", err)
	}
	if got, _ := cliA.Get(ctx, keysA.ShardBucket("bkt")); string(got.Kvs[0].Value) != "logs" {
		t.Errorf("the directory moved although the copy stopped: %v", got.Kvs)
	}
}

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// moveFixture writes the keys of bucket bkt that a move takes (moving) and
// keys of other buckets and uploads beside them that it must leave
// (staying).
func moveFixture(t *testing.T, cli *clientv3.Client, keysA etcdstore.Keys) (moving, staying map[string]string) {
	t.Helper()
	moving = map[string]string{
		keysA.Session("bkt", "u1"):                          "s1",
		keysA.Part("u1", 1):                                 "p1",
		keysA.Activity("u1"):                                "a1",
		keysA.RefSource("bkt", "m/1"):                       "rs",
		keysA.Ref("sha256:aa", "bkt", "m/1"):                "r",
		keysA.OrphanRecord("bkt", "o1"):                     "o",
		keysA.Trash("bkt", "m/0", testTime):                 "t",
		keysA.TrashRef("sha256:bb", "bkt", "m/0", testTime): "tr",
	}
	staying = map[string]string{
		keysA.Session("bkt2", "u2"):           "s2",
		keysA.Part("u2", 1):                   "p2",
		keysA.Activity("u1x"):                 "other upload's activity",
		keysA.Ref("sha256:aa", "bkt2", "m/1"): "r2",
		keysA.ShardBucket("bkt2"):             "main",
	}
	for k, v := range moving {
		if _, err := cli.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range staying {
		if _, err := cli.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	return moving, staying
}
