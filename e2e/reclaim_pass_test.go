//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/reclaim"
)

// reclaimGrace is the grace period of the reclaim pass test: long enough
// that a part sent just before a pass counts as recent activity, short
// enough that an idle upload passes it in a moment.
const reclaimGrace = 2 * time.Second

// TestReclaimPasses runs the reclaimer of the real gateway against real
// MinIO, triggered with `sweepgate reclaim run`: an upload abandoned
// through the gateway is marked by one pass and deleted by a later one,
// while an upload that keeps getting parts is kept throughout and uploads
// made directly on MinIO are held as orphans, never deleted by a pass,
// until an operator adopts one and deletes the other with --confirm.
func TestReclaimPasses(t *testing.T) {
	t.Parallel()
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"reclaim": map[string]any{"grace": reclaimGrace.String(), "delete_after": "1s", "interval": "1h"},
	}})
	e.RequireGateway(t)
	awaitLeading(t, e.Gateway)
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	store := newSessionStore(t, e)
	bucket := e.Bucket(t)
	// In shard mode every command goes to the bucket's shard.
	admin := shardAdmin{e.Gateway.AdminEndpoint, shardFlags(e.Gateway, bucket)}
	part := smallPart

	// A: abandoned after one part. K: live, gets a part before every pass.
	// O1, O2: made directly on MinIO, no session.
	const keyA, keyK, keyO1, keyO2 = "abandoned/a.bin", "live/k.bin", "orphan/o1.bin", "orphan/o2.bin"
	idA := createUpload(t, sdk, bucket, keyA)
	mustUploadPart(t, sdk, bucket, keyA, idA, 1, part())
	idK := createUpload(t, sdk, bucket, keyK)
	kParts := int32(0)
	feedK := func() {
		kParts++
		mustUploadPart(t, sdk, bucket, keyK, idK, kParts, part())
	}
	feedK()
	idO1 := createUpload(t, direct, bucket, keyO1)
	mustUploadPart(t, direct, bucket, keyO1, idO1, 1, part())
	idO2 := createUpload(t, direct, bucket, keyO2)
	mustUploadPart(t, direct, bucket, keyO2, idO2, 1, part())
	abandonedAt := time.Now()

	// Every pass, whatever it did, must keep K and hold both orphans.
	var reports []reclaim.Report
	pass := func() reclaim.Report {
		t.Helper()
		feedK()
		rep := runPass(t, admin.endpoint, admin.shard...)
		reports = append(reports, rep)
		if rep.Refused != "" || rep.Stopped != "" || rep.DryRun {
			t.Fatalf("pass %d did not run as it should: %+v", rep.Pass, rep)
		}
		if rep.Uploads.Hold.Sessions != 2 || rep.Totals.Orphans != 2 {
			t.Fatalf("pass %d holds %+v, want the two orphans", rep.Pass, rep.Uploads.Hold)
		}
		if got := store.session(t, bucket, idK).State; got != "active" {
			t.Fatalf("after pass %d, live upload K is %s", rep.Pass, got)
		}
		return rep
	}

	// Before the grace period ends, nothing is marked.
	if rep := pass(); rep.Acted.Marked.Sessions != 0 && rep.Clock.Sub(abandonedAt) < reclaimGrace {
		t.Fatalf("pass %d marked %+v before the grace period ended", rep.Pass, rep.Acted.Marked)
	}

	// Past it, a pass marks A; it is not deleted by that pass.
	time.Sleep(time.Until(abandonedAt.Add(reclaimGrace + 200*time.Millisecond)))
	var marked reclaim.Report
	eventually(t, 30*time.Second, func() (bool, string) {
		marked = pass()
		return marked.Acted.Marked.Sessions == 1, fmt.Sprintf("pass %d marked %+v", marked.Pass, marked.Acted.Marked)
	})
	if marked.Acted.Marked.Parts != 1 || marked.Acted.Deleted.Sessions != 0 || marked.Uploads.Keep.Sessions != 1 {
		t.Fatalf("marking pass %d: %+v", marked.Pass, marked)
	}
	store.requireState(t, bucket, idA, "expired")
	if got := backendPartNumbers(t, direct, bucket, keyA, idA); len(got) != 1 {
		t.Fatalf("after marking, MinIO holds parts %v of A; marking deletes nothing", got)
	}

	// A later pass, once A stayed expired for delete_after, deletes it.
	var deleted reclaim.Report
	eventually(t, 30*time.Second, func() (bool, string) {
		time.Sleep(200 * time.Millisecond)
		deleted = pass()
		return deleted.Acted.Deleted.Sessions == 1, fmt.Sprintf("pass %d deleted %+v", deleted.Pass, deleted.Acted.Deleted)
	})
	if deleted.Pass <= marked.Pass || deleted.Acted.Deleted.Parts != 1 {
		t.Fatalf("deleting pass %d (marked in pass %d): %+v", deleted.Pass, marked.Pass, deleted.Acted)
	}
	requireUploadGone(t, direct, bucket, keyA, idA)
	if rec := store.requireState(t, bucket, idA, "aborted"); !strings.Contains(rec.path(), "active->expired(reclaimer) expired->aborting(reclaimer)") {
		t.Errorf("A's history: %s", rec.path())
	}
	// K kept every part; the orphans are untouched.
	if got := backendPartNumbers(t, direct, bucket, keyK, idK); len(got) != int(kParts) {
		t.Fatalf("MinIO holds %d parts of live upload K, want %d", len(got), kParts)
	}
	o1, o2 := keyedUpload{keyO1, idO1}, keyedUpload{keyO2, idO2}
	requireOrphansUntouched(t, store, direct, bucket, len(reports), o1, o2)
	requireStoredReports(t, admin, len(reports), deleted.Pass)
	operateOrphans(t, admin, store, direct, bucket, o1, o2)

	// Nothing is held any more: O1 follows the normal rules, O2 is gone.
	feedK()
	requireNothingHeld(t, admin, direct, bucket, o1, keyedUpload{keyK, idK}, kParts)
}

// requireNothingHeld runs a pass after the operator's decisions and checks
// that it holds nothing, leaves the adopted orphan's part on MinIO and the
// live upload its kParts parts.
func requireNothingHeld(t *testing.T, admin shardAdmin, direct *s3.Client, bucket string, adopted, live keyedUpload, kParts int32) {
	t.Helper()
	rep := runPass(t, admin.endpoint, admin.shard...)
	if rep.Uploads.Hold.Sessions != 0 || rep.Totals.Orphans != 0 || rep.Uploads.Keep.Sessions+rep.Uploads.Mark.Sessions != 2 {
		t.Errorf("pass after the operator's decisions: %+v", rep.Uploads)
	}
	if got := backendPartNumbers(t, direct, bucket, adopted.key, adopted.id); len(got) != 1 {
		t.Errorf("adopted O1 has parts %v on MinIO", got)
	}
	if got := backendPartNumbers(t, direct, bucket, live.key, live.id); len(got) != int(kParts) {
		t.Errorf("live upload K has %d parts on MinIO, want %d", len(got), kParts)
	}
}

// requireStoredReports checks that the admin listener stores the n pass
// reports, the newest (pass newest) first.
func requireStoredReports(t *testing.T, admin shardAdmin, n int, newest int64) {
	t.Helper()
	var stored struct{ Reports []reclaim.Report }
	if err := json.Unmarshal([]byte(mustSweepgate(t, 0, admin.endpoint, append([]string{"reclaim", "reports", "--json", "--limit", "100"}, admin.shard...)...)), &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Reports) != n || stored.Reports[0].Pass != newest {
		t.Errorf("%d stored reports, newest %d; want %d, newest %d", len(stored.Reports), stored.Reports[0].Pass, n, newest)
	}
}

// shardAdmin is a gateway's admin endpoint and the flags that send a
// command to the shard of the test's bucket (shardFlags).
type shardAdmin struct {
	endpoint string
	shard    []string
}

// keyedUpload names an upload: its key and id.
type keyedUpload struct{ key, id string }

// operateOrphans does the operator's part: reclaim orphans lists o1 and o2,
// an unconfirmed delete of o2 changes nothing, o1 is adopted and o2 deleted.
func operateOrphans(t *testing.T, admin shardAdmin, store *sessionStore, direct *s3.Client, bucket string, o1, o2 keyedUpload) {
	t.Helper()
	ref1 := reclaim.OrphanRef{Bucket: bucket, Key: o1.key, UploadID: o1.id}.String()
	ref2 := reclaim.OrphanRef{Bucket: bucket, Key: o2.key, UploadID: o2.id}.String()
	out := mustSweepgate(t, 0, admin.endpoint, append([]string{"reclaim", "orphans"}, admin.shard...)...)
	for _, id := range []string{o1.id, o2.id} {
		if !strings.Contains(out, id) {
			t.Errorf("reclaim orphans does not list %s:\n%s", id, out)
		}
	}
	if out := mustSweepgate(t, 4, admin.endpoint, "reclaim", "orphans", "delete", ref2); !strings.Contains(out, "would delete") {
		t.Errorf("unconfirmed delete printed:\n%s", out)
	}
	if got := backendPartNumbers(t, direct, bucket, o2.key, o2.id); len(got) != 1 {
		t.Fatalf("an unconfirmed delete changed orphan O2 on MinIO: parts %v", got)
	}
	mustSweepgate(t, 0, admin.endpoint, "reclaim", "orphans", "adopt", "--principal", "backup-tool", ref1)
	if rec := store.requireState(t, bucket, o1.id, "active"); rec.Owner != "backup-tool" {
		t.Errorf("adopted O1 is owned by %q", rec.Owner)
	}
	mustSweepgate(t, 0, admin.endpoint, "reclaim", "orphans", "delete", "--confirm", "--principal", "e2e-operator", ref2)
	requireUploadGone(t, direct, bucket, o2.key, o2.id)
	if rec := store.requireState(t, bucket, o2.id, "aborted"); !strings.Contains(fmt.Sprint(rec.History), "e2e-operator") {
		t.Errorf("O2's deletion does not record who: %+v", rec.History)
	}
}

// requireOrphansUntouched checks that the orphans still have their one part
// on MinIO after passes passes, and no session.
func requireOrphansUntouched(t *testing.T, store *sessionStore, direct *s3.Client, bucket string, passes int, orphans ...keyedUpload) {
	t.Helper()
	for _, o := range orphans {
		if got := backendPartNumbers(t, direct, bucket, o.key, o.id); len(got) != 1 {
			t.Fatalf("MinIO holds parts %v of orphan %s after %d passes; a pass never deletes an orphan", got, o.key, passes)
		}
		if _, _, _, found := store.lookup(t, bucket, o.id); found {
			t.Fatalf("orphan %s has a session", o.key)
		}
	}
}
