package config

import (
	"reflect"
	"strings"
	"testing"
)

const threeShards = `etcd:
  prefix: /sg/
  ca_file: /etc/ca.pem
  shards:
    - name: main
      endpoints: [https://e1:2379]
    - name: logs
      endpoints: [https://e2:2379]
      prefix: /logs/
      buckets: [logs, audit]
    - name: reg
      endpoints: [https://e3:2379]
      buckets: [registry]
`

// TestShardsLoad reads etcd.shards from YAML and from a flag, and checks
// the defaults each shard takes and the bucket each lands on.
func TestShardsLoad(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, append(append([]string{}, requiredFlags...), "--config", writeFile(t, threeShards)), nil)
	if !c.Sharded() || c.UsesEmbeddedEtcd() {
		t.Fatalf("Sharded %v, UsesEmbeddedEtcd %v; want sharded, no embedded etcd", c.Sharded(), c.UsesEmbeddedEtcd())
	}
	got := c.Shards()
	want := []EtcdShard{
		{Name: "main", Endpoints: []string{"https://e1:2379"}, Prefix: "/sg/", CAFile: "/etc/ca.pem"},
		{Name: "logs", Endpoints: []string{"https://e2:2379"}, Prefix: "/logs/", Buckets: []string{"logs", "audit"}, CAFile: "/etc/ca.pem"},
		{Name: "reg", Endpoints: []string{"https://e3:2379"}, Prefix: "/sg/", Buckets: []string{"registry"}, CAFile: "/etc/ca.pem"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Shards:\n got %v\nwant %v", got, want)
	}
	for bucket, shard := range map[string]string{"logs": "logs", "audit": "logs", "registry": "reg", "other": "main"} {
		if s := c.ShardOf(bucket); s != shard {
			t.Errorf("ShardOf(%s) = %s, want %s", bucket, s, shard)
		}
	}

	// Without shards: one store, named default, over etcd.endpoints.
	c = mustLoad(t, append(append([]string{}, requiredFlags...), "--etcd-endpoints=http://e9:2379"), nil)
	if got := c.Shards(); len(got) != 1 || got[0].Name != DefaultShard || got[0].Endpoints[0] != "http://e9:2379" || c.ShardOf("x") != DefaultShard {
		t.Errorf("unsharded Shards = %v", got)
	}

	// The flag takes the YAML's flow style; a repeated flag adds shards.
	c = mustLoad(t, append(append([]string{}, requiredFlags...),
		"--etcd-shards={name: a, endpoints: [http://e1:2379]}", "--etcd-shards=[{name: b, endpoints: [http://e2:2379], buckets: [x]}]"), nil)
	if got := c.Shards(); len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || c.ShardOf("x") != "b" {
		t.Errorf("flag Shards = %v", got)
	}
}

// TestShardsValidation refuses what would put a bucket's state in two
// places or a layout across shards, naming what to fix.
func TestShardsValidation(t *testing.T) {
	t.Parallel()
	two := func(extra string) string {
		return "etcd:\n  shards:\n    - {name: a, endpoints: [http://e1:2379]}\n    - {name: b, endpoints: [http://e2:2379], buckets: [reg, logs]}\n" + extra
	}
	tests := []struct {
		name string
		yaml string
		args []string
		want []string
	}{
		{"with etcd.endpoints", two(""), []string{"--etcd-endpoints=http://e0:2379"}, []string{"etcd.shards", "etcd.endpoints must be empty"}},
		{"bucket twice", "etcd:\n  shards:\n    - {name: a, endpoints: [http://e1:2379], buckets: [x]}\n    - {name: b, endpoints: [http://e2:2379], buckets: [x]}\n", nil,
			[]string{"bucket x is listed on shard a and on shard b"}},
		{"name twice", "etcd:\n  shards:\n    - {name: a, endpoints: [http://e1:2379]}\n    - {name: a, endpoints: [http://e2:2379]}\n", nil,
			[]string{"shard 2 (a): the name is used twice"}},
		{"no name", "etcd:\n  shards:\n    - {endpoints: [http://e1:2379]}\n", nil, []string{"shard 1: name is required"}},
		{"no endpoints", "etcd:\n  shards:\n    - {name: a}\n", nil, []string{"shard 1 (a): endpoints are required"}},
		{"password over http", "etcd:\n  shards:\n    - {name: a, endpoints: [http://e1:2379], username: u, password_file: /p}\n", nil,
			[]string{"shard 1 (a)", "must be https://"}},
		{"layout across shards", two("digests:\n  namespaces: [reg/blobs/]\n  sources: [other/manifests/]\n"), nil,
			[]string{"digest layout spans shards", "bucket reg (digests.namespaces) is on shard b", "bucket other (digests.sources) is on shard a"}},
		{"preset across shards", two("digests:\n  preset: distribution\n  preset_storage: other/docker\n  sources: [reg/m/]\n"), nil,
			[]string{"digest layout spans shards", "bucket reg (digests.sources)", "bucket other (digests.preset_storage)"}},
		{"unknown key", "etcd:\n  shards:\n    - {name: a, endpoint: [http://e1:2379]}\n", nil, []string{"unknown key endpoint"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(append(append([]string{}, requiredFlags...), tt.args...), "--config", writeFile(t, tt.yaml))
			_, err := Load(args, nil)
			if err == nil {
				t.Fatal("Load accepted the configuration")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	// A layout within one shard, the non-default one, is accepted.
	c := mustLoad(t, append(append([]string{}, requiredFlags...), "--config",
		writeFile(t, two("digests:\n  namespaces: [reg/blobs/]\n  sources: [logs/manifests/]\n"))), nil)
	if c.LayoutShard() != "b" {
		t.Errorf("LayoutShard = %s, want b", c.LayoutShard())
	}
}
