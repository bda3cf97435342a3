//go:build integration

package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestShardsCommands plans and applies the move of a bucket between two
// real etcd shards through the command line, and lists the directory
// before and after, with the contradiction the configuration then shows.
func TestShardsCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	eA, cliA := etcdtest.Start(t)
	eB, cliB := etcdtest.Start(t)
	keys, _ := etcdstore.NewKeys(etcdstore.DefaultPrefix)
	for k, v := range map[string]string{keys.ShardBucket("bkt"): "main", keys.Session("bkt", "u1"): "s", keys.Part("u1", 1): "p"} {
		if _, err := cliA.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	shardsFlag := func(logsBuckets string) string {
		return fmt.Sprintf("--etcd-shards=[{name: main, endpoints: [%s]}, {name: logs, endpoints: [%s], buckets: [%s]}]",
			eA.Endpoints()[0], eB.Endpoints()[0], logsBuckets)
	}
	base := []string{"--backend-endpoint=http://127.0.0.1:9", "--backend-access-key=AK", "--backend-secret-key=secret-key"}
	args := func(cmd []string, logsBuckets string) []string {
		return append(append(cmd, base...), shardsFlag(logsBuckets))
	}

	code, out, errOut := runCLI(t, nil, args([]string{"shards", "list"}, "other")...)
	if code != ExitOK || !strings.Contains(out, "bkt\tmain\tmain\n") {
		t.Fatalf("shards list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, nil, args([]string{"shards", "move", "bkt", "--to", "logs"}, "other")...)
	if code != ExitOK || !strings.Contains(out, "would move bkt from shard main to shard logs") || !strings.Contains(out, "parts 1, sessions 1") {
		t.Fatalf("shards move (plan): exit %d\n%s%s", code, out, errOut)
	}
	if got, _ := cliB.Get(ctx, keys.Session("bkt", "u1")); len(got.Kvs) != 0 {
		t.Fatal("the plan moved a key")
	}
	code, out, errOut = runCLI(t, nil, args([]string{"shards", "move", "bkt", "--to", "logs", "--apply"}, "other")...)
	if code != ExitOK {
		t.Fatalf("shards move --apply: exit %d\n%s%s", code, out, errOut)
	}
	for _, k := range []string{keys.Session("bkt", "u1"), keys.Part("u1", 1)} {
		if got, _ := cliB.Get(ctx, k); len(got.Kvs) != 1 {
			t.Errorf("%s is not on shard logs after the move", k)
		}
		if got, _ := cliA.Get(ctx, k); len(got.Kvs) != 0 {
			t.Errorf("%s is still on shard main after the move", k)
		}
	}
	// The configuration still puts bkt on main: list says so and names the fix.
	code, out, _ = runCLI(t, nil, args([]string{"shards", "list"}, "other")...)
	if code != ExitOK || !strings.Contains(out, "bkt\tlogs\tmain\tCONTRADICTS") {
		t.Errorf("shards list after the move: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, nil, args([]string{"shards", "list"}, "bkt")...)
	if code != ExitOK || !strings.Contains(out, "bkt\tlogs\tlogs\n") {
		t.Errorf("shards list with the configuration updated: exit %d\n%s", code, out)
	}
	layout := append(args([]string{"shards", "move", "reg", "--to", "main"}, "bkt, reg"), "--digests-namespace=reg/blobs/", "--digests-source=reg/m/")
	if code, _, errOut := runCLI(t, nil, layout...); code != ExitError || !strings.Contains(errOut, "digest layout") {
		t.Errorf("shards move of a layout bucket: exit %d\n%s", code, errOut)
	}
	if code, _, _ := runCLI(t, nil, args([]string{"shards", "move", "--to", "logs"}, "bkt")...); code != ExitUsage {
		t.Errorf("shards move without a bucket: exit %d, want %d", code, ExitUsage)
	}
}
