package harness

import "testing"

// gcOutputV312 is the standard output of distribution v3.1.2's `registry
// garbage-collect --dry-run` after one of two tags sharing a base layer
// was deleted by digest.
const gcOutputV312 = `app
app: marking manifest sha256:b22f2081439d7072aac699aff88068ce2d34805b30621d5ff87978def49eb545 
app: marking blob sha256:57d7f66a71543db0f541dc02a4333004e138a76dab003cedcd07c6ff07818b89
app: marking blob sha256:e967d97e6850b467a9d9f139024d7d09c917b601308a73e3a5376ba96cb35b73
app: marking blob sha256:9a4ca4a9b069473911c4bf745fd53987e271211eaab4fe2465ff953ecb0f7c1e

4 blobs marked, 3 blobs and 0 manifests eligible for deletion
blob eligible for deletion: sha256:80eb67e4f41019a5a704f0c631d09e18a0a16ce75ae80e827182bc244114ff0b
blob eligible for deletion: sha256:0544c4c7e062cbe6000e92f3abfa6c52cd6fd8d190af070ed28cafe3871767fd
blob eligible for deletion: sha256:7e3d6ad64a3e83ac6e287495f44b51b27ef680695dac2a37ca0362d3e18798ad
app: layer link eligible for deletion: sha256:7e3d6ad64a3e83ac6e287495f44b51b27ef680695dac2a37ca0362d3e18798ad
app: layer link eligible for deletion: sha256:80eb67e4f41019a5a704f0c631d09e18a0a16ce75ae80e827182bc244114ff0b
`

func TestParseGCOutput(t *testing.T) {
	res, err := parseGCOutput(gcOutputV312)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sha256:80eb67e4f41019a5a704f0c631d09e18a0a16ce75ae80e827182bc244114ff0b",
		"sha256:0544c4c7e062cbe6000e92f3abfa6c52cd6fd8d190af070ed28cafe3871767fd",
		"sha256:7e3d6ad64a3e83ac6e287495f44b51b27ef680695dac2a37ca0362d3e18798ad",
	}
	if res.Marked != 4 || len(res.Eligible) != len(want) {
		t.Fatalf("marked %d, eligible %v", res.Marked, res.Eligible)
	}
	for _, d := range want {
		if !res.Eligible[d] {
			t.Errorf("%s not eligible", d)
		}
	}
}

// TestParseGCOutputUnknownFormat checks that an output whose lines this
// parser does not know fails instead of reading as nothing eligible.
func TestParseGCOutputUnknownFormat(t *testing.T) {
	for name, out := range map[string]string{
		"no summary":        "app\napp: marking manifest sha256:b22f2081439d7072aac699aff88068ce2d34805b30621d5ff87978def49eb545\n",
		"empty":             "",
		"renamed lines":     "4 blobs marked, 1 blobs and 0 manifests eligible for deletion\nblob to delete: sha256:80eb67e4f41019a5a704f0c631d09e18a0a16ce75ae80e827182bc244114ff0b\n",
		"two summaries":     "1 blobs marked, 0 blobs and 0 manifests eligible for deletion\n1 blobs marked, 0 blobs and 0 manifests eligible for deletion\n",
		"blob before count": "blob eligible for deletion: sha256:80eb67e4f41019a5a704f0c631d09e18a0a16ce75ae80e827182bc244114ff0b\n1 blobs marked, 1 blobs and 0 manifests eligible for deletion\n",
	} {
		if res, err := parseGCOutput(out); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, res)
		}
	}
}
