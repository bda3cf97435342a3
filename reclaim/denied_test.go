//go:build integration

package reclaim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/reclaim/reclaimtest"
)

// reclaimerPolicy is the minimum policy of the reclaimer's key on bucket
// (docs/architecture.md, "Backend identities"), the restore witness's
// bucket.
func reclaimerPolicy(bucket string) string {
	return `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Action":["s3:ListBucket","s3:ListBucketMultipartUploads","s3:ListBucketVersions","s3:GetBucketVersioning"],"Resource":["arn:aws:s3:::` + bucket + `"]},` +
		`{"Effect":"Allow","Action":["s3:ListMultipartUploadParts","s3:AbortMultipartUpload","s3:GetObject","s3:GetObjectVersion","s3:DeleteObject"],"Resource":["arn:aws:s3:::` + bucket + `/*"]},` +
		`{"Effect":"Allow","Action":["s3:PutObject"],"Resource":["arn:aws:s3:::` + bucket + `/` + reclaim.DefaultWitnessKeyPrefix + `/*"]}]}`
}

// TestDeniedBucketIsSkipped runs the reclaimer with a key MinIO allows one
// of its two buckets (reclaim.buckets names both): the other's listing is
// refused, and the pass skips that bucket, names it in its report and
// counts it, while it marks and then deletes the abandoned upload of the
// allowed bucket. Nothing in the denied bucket is marked, deleted or
// reported missing: its abandoned upload keeps its parts and its session
// stays active.
func TestDeniedBucketIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	if err := e.MinIO.AddUser(ctx, "reclaimer", "reclaimer-secret", reclaimerPolicy("open")); err != nil {
		t.Fatal(err)
	}
	now := e.Clock.Now()
	ids := map[string]string{}
	for _, b := range []string{"closed", "open"} {
		e.Bucket(b)
		ids[b] = e.Upload(b, "abandoned", 2)
		e.session(b, "abandoned", ids[b], etcdstore.StateActive, now.Add(-31*time.Hour), now.Add(-30*time.Hour))
	}
	be, err := backend.NewStatic(e.MinIO.Endpoint, e.MinIO.Region, "reclaimer", "reclaimer-secret")
	if err != nil {
		t.Fatal(err)
	}
	scoped := e.Scoped(be)
	cfg := e.Config()
	cfg.Backend, cfg.Buckets, cfg.WitnessBucket = scoped, []string{"open", "closed"}, "open"
	// The only upload the sweep sees is the one it deletes.
	cfg.MaxDeleteFraction, cfg.MaxDeleteUploadsFraction = 1, 1
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	r := e.Start(cfg)

	check := func(rep reclaim.Report) {
		t.Helper()
		if rep.Stopped != "" || rep.Refused != "" {
			t.Fatalf("pass stopped %q, refused %q", rep.Stopped, rep.Refused)
		}
		if !slices.Equal(rep.DeniedBuckets, []string{"closed"}) {
			t.Errorf("denied buckets = %q, want [closed]", rep.DeniedBuckets)
		}
		if len(rep.Missing) != 0 || rep.Totals.Missing != 0 {
			t.Errorf("missing sessions %+v: the denied bucket's session looks missing", rep.Missing)
		}
		if got := e.partsOnMinIO("closed", "abandoned", ids["closed"]); got != 2 {
			t.Errorf("the denied bucket's upload has %d parts, want 2 (untouched)", got)
		}
		if s := e.getSession("closed", ids["closed"]); s.State != etcdstore.StateActive || s.ExpiredAt != nil {
			t.Errorf("the denied bucket's session is %s (expired %v), want active and unmarked", s.State, s.ExpiredAt)
		}
	}
	rep := e.MustPass(r)
	check(rep)
	if rep.Acted.Marked != count(1, 2) {
		t.Errorf("first pass marked %+v, want the open bucket's upload", rep.Acted.Marked)
	}
	e.Clock.Advance(13 * time.Hour)
	rep = e.MustPass(r)
	check(rep)
	if rep.Acted.Deleted != count(1, 2) {
		t.Errorf("second pass deleted %+v, want the open bucket's upload", rep.Acted.Deleted)
	}
	if got := e.partsOnMinIO("open", "abandoned", ids["open"]); got != -1 {
		t.Errorf("the open bucket's upload has %d parts, want it aborted", got)
	}
	if got := reclaimtest.Metric(t, reg, "sweepgate_reclaim_denied_buckets_total", "sweep", "uploads"); got != 2 {
		t.Errorf("sweepgate_reclaim_denied_buckets_total{sweep=uploads} = %v, want 2", got)
	}
}
