package harness

import (
	"slices"
	"testing"
)

// TestShardModeOptions checks the etcd.shards shard mode gives a gateway:
// the default shard lists nothing, every other shard lists its witness
// bucket first and then the reserved names it holds, and a digest layout's
// buckets all go to the shard of its storage bucket, whatever shards their
// names were reserved on.
func TestShardModeOptions(t *testing.T) {
	s := &shardSet{
		names:     []string{"shard0", "shard1", "shard2"},
		endpoints: [][]string{{"http://a"}, {"http://b"}, {"http://c"}},
		anchors:   []string{"w1", "w2"},
		assign:    map[string]int{"r0": 1, "r1": 2, "r2": 0, "r3": 1, "w1": 1, "w2": 2},
	}
	opts := s.options(t, Options{EtcdEndpoints: []string{"http://a"}, Config: map[string]any{"digests": map[string]any{
		"namespaces": []string{"r1/blobs/sha256/"},
		"sources":    []any{map[string]any{"bucket": "r0", "prefix": "manifests/"}, "r2/charts/"},
	}}})
	if opts.EtcdEndpoints != nil || len(opts.EtcdShards) != 3 {
		t.Fatalf("options: endpoints %v, shards %v", opts.EtcdEndpoints, opts.EtcdShards)
	}
	if _, ok := opts.EtcdShards[0]["buckets"]; ok {
		t.Errorf("the default shard lists buckets: %v", opts.EtcdShards[0])
	}
	want := map[int][]string{1: {"w1", "r3"}, 2: {"w2", "r0", "r1", "r2"}}
	for i, b := range want {
		sh := opts.EtcdShards[i]
		if got, _ := sh["buckets"].([]string); !slices.Equal(got, b) || sh["name"] != s.names[i] || !slices.Equal(sh["endpoints"].([]string), s.endpoints[i]) {
			t.Errorf("shard %d = %v, want buckets %v", i, sh, b)
		}
	}
	if s.shardOf("r2") != 2 || s.shardOf("unreserved") != 0 {
		t.Errorf("shardOf: r2 on %d, an unreserved name on %d", s.shardOf("r2"), s.shardOf("unreserved"))
	}
}

// TestLayoutBuckets checks which buckets a digest configuration names and
// which of them keeps the layout: the first namespace's, else the preset
// storage's, else the first source's.
func TestLayoutBuckets(t *testing.T) {
	tests := []struct {
		digests map[string]any
		want    []string
	}{
		{map[string]any{"namespaces": []string{"a/blobs/"}, "sources": []string{"b/m/", "a/m/"}}, []string{"a", "b"}},
		{map[string]any{"preset": "distribution", "preset_storage": "reg/root"}, []string{"reg"}},
		{map[string]any{"sources": []any{"s/x/", map[string]any{"bucket": "t"}}}, []string{"s", "t"}},
		{nil, nil},
	}
	for _, tt := range tests {
		got, storage := layoutBuckets(map[string]any{"digests": tt.digests})
		if !slices.Equal(got, tt.want) || (len(got) > 0 && storage != got[0]) || (len(got) == 0 && storage != "") {
			t.Errorf("layoutBuckets(%v) = %v, %q; want %v, the first keeping it", tt.digests, got, storage, tt.want)
		}
	}
}

// TestReserveSpreads checks that a test's reserved bucket names are
// distinct, that its first is on the shard its name hashes to, and that
// they run out after reservedBuckets.
func TestReserveSpreads(t *testing.T) {
	r := reserve(t, 3)
	if r != reserve(t, 3) {
		t.Fatal("a second reserve of the same test made other names")
	}
	seen := map[string]bool{}
	for range reservedBuckets {
		name, ok := r.take()
		if !ok || seen[name] {
			t.Fatalf("take = %q, %v after %d names", name, ok, len(seen))
		}
		seen[name] = true
	}
	if name, ok := r.take(); ok {
		t.Errorf("take past the reserved names = %q", name)
	}
	if r.first < 0 || r.first >= 3 {
		t.Errorf("first shard %d out of 3", r.first)
	}
}
