//go:build integration

package reclaim_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reclaim"
)

func TestOrphans(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	s5 := e.Upload(inv.bucket, "s5/object", 2)
	r := e.Start(e.Config())
	term, _ := r.Leader()
	one := e.MustPass(r)
	if one.Totals.Orphans != 2 {
		t.Fatalf("orphans = %+v, want S4 and S5", one.Orphans)
	}
	listed, total, err := r.Orphans(t.Context())
	if err != nil || total != 2 || len(listed) != 2 {
		t.Fatalf("Orphans = %v, %d, %v", listed, total, err)
	}
	var scanned []string
	if err := r.ScanOrphans(t.Context(), func(o reclaim.Orphan) error { scanned = append(scanned, o.UploadID); return nil }); err != nil || len(scanned) != 2 {
		t.Fatalf("ScanOrphans = %v, %v", scanned, err)
	}

	// Adopt S4: it gets an active session and follows the normal rules.
	rec, err := r.Adopt(t.Context(), inv.bucket, inv.k4, inv.s4, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Parts != 3 || rec.Term != term {
		t.Errorf("adopt record %+v", rec)
	}
	s4 := e.getSession(inv.bucket, inv.s4)
	if s4.State != etcdstore.StateActive || s4.Owner != "bob" || s4.History[len(s4.History)-1].Reason != "adopted by operator" || s4.History[len(s4.History)-1].Term != term {
		t.Errorf("adopted session %+v", s4)
	}
	if _, err := r.Adopt(t.Context(), inv.bucket, inv.k4, inv.s4, "bob"); !errors.Is(err, reclaim.ErrNotOrphan) {
		t.Errorf("second adopt: %v, want ErrNotOrphan", err)
	}

	// An unconfirmed delete does nothing.
	ref := reclaim.OrphanRef{Bucket: inv.bucket, Key: "s5/object", UploadID: s5}
	res, err := r.DeleteOrphans(t.Context(), "carol", []reclaim.OrphanRef{ref}, false)
	if !errors.Is(err, reclaim.ErrNotConfirmed) || len(res) != 1 || res[0].Deleted || res[0].Parts != 2 {
		t.Fatalf("unconfirmed delete = %+v, %v", res, err)
	}
	if e.partsOnMinIO(inv.bucket, "s5/object", s5) != 2 || e.Backend.Aborts.Load() != 0 {
		t.Fatal("an unconfirmed delete changed the backend")
	}
	if _, err := e.Store.GetSession(t.Context(), inv.bucket, s5); !errors.Is(err, etcdstore.ErrNotFound) {
		t.Fatalf("an unconfirmed delete wrote a session: %v", err)
	}

	// A confirmed delete of S5 and of S1 (which has a session): only the
	// orphan goes.
	s1ref := reclaim.OrphanRef{Bucket: inv.bucket, Key: inv.k1, UploadID: inv.s1}
	res, err = r.DeleteOrphans(t.Context(), "carol", []reclaim.OrphanRef{ref, s1ref}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Deleted || res[0].Outcome != "aborted" || res[1].Deleted {
		t.Errorf("confirmed delete = %+v", res)
	}
	if e.partsOnMinIO(inv.bucket, "s5/object", s5) != -1 || e.partsOnMinIO(inv.bucket, inv.k1, inv.s1) != 12 {
		t.Error("confirmed delete did not remove exactly the orphan")
	}
	got, err := e.Cli.Get(t.Context(), e.Store.Keys().OrphanRecords(), clientv3.WithPrefix())
	if err != nil || got.Count != 2 {
		t.Fatalf("orphan records = %d (%v), want adopt and delete", got.Count, err)
	}
	for _, kv := range got.Kvs {
		var rec etcdstore.OrphanRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Action == etcdstore.OrphanDeleted && (rec.Outcome != "aborted" || rec.Principal != "carol" || rec.Parts != 2) {
			t.Errorf("delete record %+v", rec)
		}
	}

	// The next pass sees no orphans: S4 is adopted, S5 is gone.
	two := e.MustPass(r)
	if two.Uploads.Hold != (reclaim.Count{}) || len(two.Orphans) != 0 {
		t.Errorf("orphans after adopt and delete: %+v", two.Orphans)
	}
}

// TestUnlistedAndMissing hides S3 from the backend's listing, as MinIO does
// after a restart, and adds a session whose upload is gone: S3 is found
// through its session and judged like the rest; the other is reported.
func TestUnlistedAndMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.scenarioInventory()
	now := e.Clock.Now()
	e.session(inv.bucket, "gone", "no-such-upload", etcdstore.StateActive, now.Add(-time.Hour), now.Add(-time.Hour))
	e.session("no-such-bucket", "k", "no-such-upload-2", etcdstore.StateActive, now.Add(-time.Hour), now.Add(-time.Hour))
	e.Backend.Hidden.Store(inv.s3)
	r := e.Start(e.Config())

	rep := e.MustPass(r)
	wantUploads(t, rep.Uploads, count(2, 19), count(1, 5), count(0, 0), count(1, 3))
	if rep.Totals.Unlisted != 1 || rep.Acted.Marked != count(1, 5) {
		t.Errorf("unlisted %d, acted %+v; want S3 found and marked", rep.Totals.Unlisted, rep.Acted)
	}
	if rep.Totals.Missing != 2 || len(rep.Missing) != 2 {
		t.Fatalf("missing sessions = %+v, want two", rep.Missing)
	}
	for _, m := range rep.Missing {
		if m.UploadID != "no-such-upload" && m.UploadID != "no-such-upload-2" {
			t.Errorf("unexpected missing session %+v", m)
		}
	}
}

func TestParseOrphanRef(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want reclaim.OrphanRef
		ok   bool
	}{
		{"b/k?uploadId=u", reclaim.OrphanRef{Bucket: "b", Key: "k", UploadID: "u"}, true},
		{"b/dir/k?x?uploadId=u1", reclaim.OrphanRef{Bucket: "b", Key: "dir/k?x", UploadID: "u1"}, true},
		{"b/k", reclaim.OrphanRef{}, false},
		{"b?uploadId=u", reclaim.OrphanRef{}, false},
		{"b/k?uploadId=", reclaim.OrphanRef{}, false},
	} {
		got, err := reclaim.ParseOrphanRef(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseOrphanRef(%q) = %+v, %v", tt.in, got, err)
		}
		if tt.ok && got.String() != tt.in {
			t.Errorf("String() = %q, want %q", got.String(), tt.in)
		}
	}
}
