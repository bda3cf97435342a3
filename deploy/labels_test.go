//go:build integration

package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// forbiddenLabels would each make a series per value that clients or data
// choose: a scrape that grows with the objects stored, and names that
// belong in logs and reports, not in metrics.
var forbiddenLabels = []string{
	"bucket", "key", "object", "path", "prefix", "upload", "upload_id", "uploadid", "part", "part_number",
	"digest", "blob", "manifest", "source", "principal", "owner", "access_key", "user",
	"request_id", "id", "session", "etag", "remote", "host", "url",
}

// allowedLabels are the labels sweepgate's own metrics may carry, each
// with a small closed set of values. A new one belongs here only when that
// holds for it.
var allowedLabels = map[string]string{
	"operation":    "S3 operation names (s3op.Operation, closed)",
	"status_class": "1xx..5xx, other",
	"code":         "S3 error codes of signature verification",
	"op":           "etcd request kinds, or S3 operation names",
	"state":        "session and tombstone states",
	"from":         "session states",
	"to":           "session states",
	"result":       "pass results",
	"verdict":      "keep, mark, delete, hold",
	"outcome":      "aborted, cleanup_pending",
	"sweep":        "uploads, digests",
	"clock":        "gateway, backend",
	"endpoint":     "the configured etcd endpoints (etcd.endpoints), or the embedded member's",
	"plane":        "the configured planes (digests.planes)",
	"limit":        "total, credential (the in-flight limits)",
	"shard":        "the configured shards (etcd.shards)",
}

// TestMetricLabels wires everything serve registers and checks every
// family's labels, observed or not: none may carry a bucket, key, upload
// id, digest or principal, and sweepgate's own use only the closed sets
// above.
func TestMetricLabels(t *testing.T) {
	fams := wire(t).gather(t)
	if len(fams) < 30 {
		t.Fatalf("only %d metric families registered: the wiring is incomplete", len(fams))
	}
	for _, name := range sortedKeys(fams) {
		for _, l := range fams[name].labels {
			if slices.Contains(forbiddenLabels, strings.ToLower(l)) {
				t.Errorf("%s has label %q: a label must never carry a bucket, key, upload id, digest or principal", name, l)
				continue
			}
			if _, ok := allowedLabels[l]; !ok && strings.HasPrefix(name, "sweepgate_") {
				t.Errorf("%s has label %q, which is not among the known closed sets; add it to allowedLabels only if its values are few and fixed", name, l)
			}
		}
	}
}

// TestMetricsDocumented keeps docs/admin-api.md's metrics section complete:
// every family sweepgate registers is named there.
func TestMetricsDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/admin-api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Metrics\n")
	if !ok {
		t.Fatal("docs/admin-api.md has no Metrics section")
	}
	for _, name := range sortedKeys(wire(t).gather(t)) {
		if strings.HasPrefix(name, "sweepgate_") && !strings.Contains(section, "`"+name+"`") && !strings.Contains(section, "`"+name+"{") {
			t.Errorf("docs/admin-api.md does not document %s", name)
		}
	}
}
