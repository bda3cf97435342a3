//go:build integration

package shards

import (
	"context"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestDirectory writes entries create-if-absent in a real etcd, follows a
// change made by another process, and finds a shard's state by bucket.
func TestDirectory(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, cli := etcdtest.Start(t)
	keys, _ := etcdstore.NewKeys("/sg/")
	if _, err := cli.Put(ctx, keys.ShardBucket("before"), "b"); err != nil {
		t.Fatal(err)
	}
	d := NewDirectory(cli, keys)
	if err := d.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if s, ok := d.Get("before"); !ok || s != "b" {
		t.Errorf("Get(before) = %q %v after Load", s, ok)
	}
	// Another gateway wrote first: Assign keeps its entry and says so.
	other := NewDirectory(cli, keys)
	if s, err := other.Assign(ctx, "x/y", "a"); err != nil || s != "a" {
		t.Fatalf("first Assign = %q, %v", s, err)
	}
	if s, err := d.Assign(ctx, "x/y", "b"); err != nil || s != "a" {
		t.Errorf("second Assign = %q, %v; want the stored a", s, err)
	}
	if got, _ := cli.Get(ctx, keys.ShardBucket("x/y")); len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "a" {
		t.Errorf("stored entry %v", got.Kvs)
	}

	// Run follows entries written elsewhere (a move's flip).
	go d.Run(ctx)
	if _, err := cli.Put(ctx, keys.ShardBucket("late"), "c"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s, ok := d.Get("late"); ok && s == "c" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch did not bring the entry written elsewhere")
		}
		time.Sleep(10 * time.Millisecond)
	}

	held, err := HoldsState(ctx, cli, keys, "bkt")
	if err != nil || held {
		t.Fatalf("HoldsState of an empty bucket = %v, %v", held, err)
	}
	if _, err := cli.Put(ctx, keys.Session("bkt", "up1"), "{}"); err != nil {
		t.Fatal(err)
	}
	if held, err := HoldsState(ctx, cli, keys, "bkt"); err != nil || !held {
		t.Errorf("HoldsState with a session = %v, %v", held, err)
	}
	if held, _ := HoldsState(ctx, cli, keys, "bk"); held {
		t.Error("HoldsState counts another bucket's session whose name starts the same")
	}
}
