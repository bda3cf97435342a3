package main

import (
	"slices"
	"testing"

	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestReclaimScope checks which buckets each shard's reclaimer sweeps: a
// shard's reclaimer never lists another shard's bucket, whose sessions it
// cannot see, and each non-default shard keeps its own witness key.
func TestReclaimScope(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.Etcd.Shards = []config.EtcdShard{
		{Name: "main", Endpoints: []string{"http://a:2379"}},
		{Name: "logs", Endpoints: []string{"http://b:2379"}, Buckets: []string{"logs", "audit"}},
		{Name: "reg", Endpoints: []string{"http://c:2379"}, Buckets: []string{"registry"}},
	}
	keys, _ := etcdstore.NewKeys("/sweepgate/")
	shard := func(name string) *shardState { return &shardState{name: name, keys: keys} }

	main := reclaimScope(cfg, shard("main"))
	if main.buckets != nil || !slices.Equal(main.exclude, []string{"logs", "audit", "registry"}) || main.witnessKey != "" {
		t.Errorf("default shard scope = %+v; want every bucket but the other shards'", main)
	}
	logs := reclaimScope(cfg, shard("logs"))
	if !slices.Equal(logs.buckets, []string{"logs", "audit"}) || logs.exclude != nil || logs.witnessKey != ".sweepgate-witness/sweepgate-shard-logs" {
		t.Errorf("logs shard scope = %+v", logs)
	}

	cfg.Reclaim.Buckets = []string{"a", "logs", "registry"}
	if sc := reclaimScope(cfg, shard("main")); !slices.Equal(sc.buckets, []string{"a"}) || sc.off != "" {
		t.Errorf("default shard within reclaim.buckets = %+v", sc)
	}
	if sc := reclaimScope(cfg, shard("logs")); !slices.Equal(sc.buckets, []string{"logs"}) {
		t.Errorf("logs shard within reclaim.buckets = %+v", sc)
	}
	cfg.Reclaim.Buckets = []string{"registry"}
	if sc := reclaimScope(cfg, shard("logs")); sc.off == "" {
		t.Errorf("a shard none of whose buckets is in reclaim.buckets sweeps %+v", sc)
	}
	if sc := reclaimScope(cfg, shard("main")); sc.off == "" {
		t.Errorf("the default shard with every reclaim.buckets elsewhere sweeps %+v", sc)
	}

	cfg.Etcd.Shards, cfg.Reclaim.Buckets = nil, []string{"x"}
	if sc := reclaimScope(cfg, shard("default")); !slices.Equal(sc.buckets, []string{"x"}) || sc.exclude != nil {
		t.Errorf("unsharded scope = %+v; want reclaim.buckets as it is", sc)
	}
}
