//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// reconcilerConfig runs the reconciler often, on sessions that stood a
// second in their state: long enough for a test to see the state a request
// left, short enough to wait for.
var reconcilerConfig = map[string]any{
	"sessions": map[string]any{"reconcile_interval": "200ms", "reconcile_after": "1s"},
}

// withIdempotencyKey adds an Idempotency-Key header to one aws-sdk-go-v2
// call.
func withIdempotencyKey(key string) func(*s3.Options) {
	return s3.WithAPIOptions(smithyhttp.AddHeaderValue("Idempotency-Key", key))
}

// isObject selects the requests for bucket/key with the method.
func isObject(method, bucket, key string) func(harness.ProxiedRequest) bool {
	return func(r harness.ProxiedRequest) bool {
		return r.Method == method && r.Path == "/"+bucket+"/"+key
	}
}

// TestSessionsBackendLostResponses loses MinIO's answers to the gateway's
// abort and complete calls (a fault-injecting proxy between them forwards
// the request and drops the response, or drops the request) and checks
// that the client still gets S3's answer, that the session records the
// doubt, that the reconciler settles it by looking at MinIO again, and that
// no bytes are lost or left behind.
func TestSessionsBackendLostResponses(t *testing.T) {
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{Config: reconcilerConfig})
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	bucket := e.Bucket(t)
	part := harness.NewData(4001, 5*mib)
	tail := harness.NewData(4002, 1234)

	w := &lostWorld{e: e, proxy: proxy, store: store, c: c, direct: direct, bucket: bucket, part: part, tail: tail}
	t.Run("abort answer lost", w.abortAnswerLost)
	t.Run("abort never reached MinIO", w.abortNeverReached)
	t.Run("abort with Idempotency-Key answer lost", w.abortIdempotentAnswerLost)
	t.Run("complete answer lost", w.completeAnswerLost)
	t.Run("complete answer and check lost", w.completeAnswerAndCheckLost)
}

// lostWorld is what TestSessionsBackendLostResponses' cases share: a gateway
// behind a fault proxy to MinIO, its sessions, clients of both, a bucket
// and the data of the parts.
type lostWorld struct {
	e      *harness.Env
	proxy  *harness.FaultProxy
	store  *sessionStore
	c      *s3.Client
	direct *s3.Client
	bucket string
	part   harness.Data
	tail   harness.Data
}

// newUpload creates an upload with one part through the gateway.
func (w *lostWorld) newUpload(t *testing.T, key string) string {
	t.Helper()
	id := createUpload(t, w.c, w.bucket, key)
	mustUploadPart(t, w.c, w.bucket, key, id, 1, w.tail.Section(0, w.tail.Size))
	return id
}

// requireReconciledAbort waits for the reconciler to record aborted and
// checks that MinIO holds nothing of the upload.
func (w *lostWorld) requireReconciledAbort(t *testing.T, key, id string) {
	t.Helper()
	rec := w.store.waitState(t, w.bucket, id, "aborted")
	if last := rec.History[len(rec.History)-1]; last.Actor != "reconciler" {
		t.Fatalf("history %s: want the reconciler to have recorded aborted", rec.path())
	}
	if _, ok := rec.transitioned("aborting", "cleanup_pending"); !ok {
		t.Fatalf("history %s: the gateway's unclear abort is not recorded", rec.path())
	}
	requireUploadGone(t, w.direct, w.bucket, key, id)
}

// abortAnswerLost: the abort's answer is lost on its way back from MinIO.
func (w *lostWorld) abortAnswerLost(t *testing.T) {
	key := "lost/abort-answer"
	id := w.newUpload(t, key)
	drop := w.proxy.Inject(harness.Rule{Match: harness.MatchUpload(http.MethodDelete, id), Fault: harness.DropResponse, Times: 1})
	defer drop.Remove()
	if err := abortUpload(t.Context(), w.c, w.bucket, key, id); err != nil {
		t.Fatalf("abort whose backend answer was lost: %v, want 204", err)
	}
	if drop.Hits() != 1 {
		t.Fatalf("the fault hit %d requests, want 1", drop.Hits())
	}
	rec := w.store.requireState(t, w.bucket, id, "cleanup_pending")
	if _, ok := rec.transitioned("aborting", "cleanup_pending"); !ok || rec.Uncertain == "" {
		t.Fatalf("history %s, uncertain %q: want aborting->cleanup_pending with the doubt recorded", rec.path(), rec.Uncertain)
	}
	// The upload is logically gone: a repeated abort answers 204 and a
	// part is refused.
	if err := abortUpload(t.Context(), w.c, w.bucket, key, id); err != nil {
		t.Fatalf("repeated abort of a cleanup_pending upload: %v, want 204", err)
	}
	_, err := uploadPart(t.Context(), w.c, w.bucket, key, id, 2, w.tail.Section(0, w.tail.Size))
	requireAPIError(t, err, "NoSuchUpload")
	w.requireReconciledAbort(t, key, id)
}

// abortNeverReached: the abort is lost on its way to MinIO.
func (w *lostWorld) abortNeverReached(t *testing.T) {
	key := "lost/abort-request"
	id := w.newUpload(t, key)
	// Every abort of this upload is lost on the way to MinIO, the
	// reconciler's too, until the fault is removed.
	lost := w.proxy.Inject(harness.Rule{Match: harness.MatchUpload(http.MethodDelete, id), Fault: harness.CloseBeforeForward})
	defer lost.Remove()
	if err := abortUpload(t.Context(), w.c, w.bucket, key, id); err != nil {
		t.Fatalf("abort whose backend call failed: %v, want 204", err)
	}
	rec := w.store.requireState(t, w.bucket, id, "cleanup_pending")
	if rec.Uncertain == "" {
		t.Fatalf("cleanup_pending session records no doubt: %+v", rec)
	}
	// MinIO still holds the upload, but clients no longer see it.
	if !slices.Contains(backendUploads(t, w.direct, w.bucket), id) {
		t.Fatalf("MinIO does not hold upload %s; the proxy should have kept the abort from it", id)
	}
	if slices.Contains(backendUploads(t, w.c, w.bucket), id) {
		t.Fatalf("ListMultipartUploads through the gateway lists the cleanup_pending upload %s", id)
	}
	_, err := w.c.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(w.bucket), Key: aws.String(key), UploadId: aws.String(id)})
	requireAPIError(t, err, "NoSuchUpload")
	// The reconciler tries again (and fails, the fault still armed):
	// the session stays cleanup_pending, never aborted on a guess.
	eventually(t, sessionWait, func() (bool, string) {
		return lost.Hits() >= 2, "the reconciler did not retry the abort"
	})
	eventually(t, sessionWait, func() (bool, string) {
		rec := w.store.session(t, w.bucket, id)
		return rec.State == "cleanup_pending" && rec.AbortAttempts >= 2 && rec.Uncertain != "",
			fmt.Sprintf("session %s, %d abort attempts, uncertain %q: want cleanup_pending with the retry recorded", rec.State, rec.AbortAttempts, rec.Uncertain)
	})
	if slices.Contains(backendUploads(t, w.c, w.bucket), id) || !slices.Contains(backendUploads(t, w.direct, w.bucket), id) {
		t.Fatal("while its abort fails, the upload must stay hidden from clients and on MinIO")
	}
	lost.Remove()
	w.requireReconciledAbort(t, key, id)
}

// abortIdempotentAnswerLost: the answer to an abort with an
// Idempotency-Key is lost on its way back from MinIO.
func (w *lostWorld) abortIdempotentAnswerLost(t *testing.T) {
	key := "lost/abort-idempotent"
	id := w.newUpload(t, key)
	drop := w.proxy.Inject(harness.Rule{Match: harness.MatchUpload(http.MethodDelete, id), Fault: harness.DropResponse, Times: 1})
	defer drop.Remove()
	_, err := w.c.AbortMultipartUpload(t.Context(), &s3.AbortMultipartUploadInput{Bucket: aws.String(w.bucket), Key: aws.String(key), UploadId: aws.String(id)},
		withIdempotencyKey("lost-abort-"+id))
	if err != nil {
		t.Fatalf("abort whose backend answer was lost: %v, want 204", err)
	}
	// An unclear outcome is not retried blindly:
	// MinIO got one abort, and the session records the doubt.
	if sent := w.proxy.Find(harness.MatchUpload(http.MethodDelete, id)); len(sent) != 1 {
		t.Errorf("the gateway sent %d aborts to MinIO for one client abort (faults: %v); an unclear abort must not be retried blindly", len(sent), faultsOf(sent))
	}
	rec := w.store.session(t, w.bucket, id)
	if _, ok := rec.transitioned("aborting", "cleanup_pending"); !ok {
		t.Errorf("history %s: the lost answer is not recorded as cleanup_pending", rec.path())
	}
	w.store.waitState(t, w.bucket, id, "aborted")
	requireUploadGone(t, w.direct, w.bucket, key, id)
}

// completeAnswerLost: the complete's answer is lost on its way back from
// MinIO.
func (w *lostWorld) completeAnswerLost(t *testing.T) {
	key := "lost/complete-answer"
	id := createUpload(t, w.c, w.bucket, key)
	parts := []s3types.CompletedPart{
		mustUploadPart(t, w.c, w.bucket, key, id, 1, w.part.Section(0, w.part.Size)),
		mustUploadPart(t, w.c, w.bucket, key, id, 2, w.tail.Section(0, w.tail.Size)),
	}
	drop := w.proxy.Inject(harness.Rule{Match: harness.MatchUpload(http.MethodPost, id), Fault: harness.DropResponse, Times: 1})
	defer drop.Remove()
	first, err := completeUpload(t.Context(), w.c, w.bucket, key, id, parts)
	if err != nil {
		t.Fatalf("complete whose backend answer was lost: %v", err)
	}
	if drop.Hits() != 1 {
		t.Fatalf("the fault hit %d requests, want 1", drop.Hits())
	}
	retry, err := completeUpload(t.Context(), w.c, w.bucket, key, id, parts)
	if err != nil {
		t.Fatalf("retried complete: %v", err)
	}
	requireSameCompletion(t, first, retry)
	sum, size := concatSum(t, w.part.Reader(), w.tail.Reader())
	obj := requireObjectSum(t, w.direct, w.bucket, key, sum, size)
	if unquoteETag(aws.ToString(obj.ETag)) != unquoteETag(aws.ToString(first.ETag)) {
		t.Fatalf("object ETag %s, complete answered %s", aws.ToString(obj.ETag), aws.ToString(first.ETag))
	}
	requireCompletedSession(t, w.store, w.bucket, id, aws.ToString(obj.ETag))
	if sent := w.proxy.Find(harness.MatchUpload(http.MethodPost, id)); len(sent) != 1 {
		t.Fatalf("MinIO got %d completes; the retry should have been answered from the record", len(sent))
	}
}

// completeAnswerAndCheckLost: the complete's answer is lost, and so is
// the answer of the check the gateway makes after it.
func (w *lostWorld) completeAnswerAndCheckLost(t *testing.T) {
	key := "lost/complete-unclear"
	id := createUpload(t, w.c, w.bucket, key)
	parts := []s3types.CompletedPart{
		mustUploadPart(t, w.c, w.bucket, key, id, 1, w.part.Section(0, w.part.Size)),
		mustUploadPart(t, w.c, w.bucket, key, id, 2, w.tail.Section(0, w.tail.Size)),
	}
	drop := w.proxy.Inject(harness.Rule{Match: harness.MatchUpload(http.MethodPost, id), Fault: harness.DropResponse, Times: 1})
	defer drop.Remove()
	// The gateway's look at the object after the lost answer is lost
	// too, so it cannot tell whether the complete happened.
	noHead := w.proxy.Inject(harness.Rule{Match: isObject(http.MethodHead, w.bucket, key), Fault: harness.CloseBeforeForward})
	defer noHead.Remove()
	_, err := completeUpload(t.Context(), w.c, w.bucket, key, id, parts)
	if err == nil {
		t.Fatal("complete answered success though the gateway could not know the outcome")
	}
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() < 500 {
		t.Fatalf("complete with an unknown outcome: %v, want a 5xx the client retries", err)
	}
	rec := w.store.requireState(t, w.bucket, id, "completing")
	if rec.Uncertain == "" {
		t.Fatalf("completing session records no doubt: %+v", rec)
	}
	noHead.Remove()
	retry, err := completeUpload(t.Context(), w.c, w.bucket, key, id, parts)
	if err != nil {
		t.Fatalf("retried complete: %v", err)
	}
	sum, size := concatSum(t, w.part.Reader(), w.tail.Reader())
	obj := requireObjectSum(t, w.direct, w.bucket, key, sum, size)
	if unquoteETag(aws.ToString(obj.ETag)) != unquoteETag(aws.ToString(retry.ETag)) {
		t.Fatalf("object ETag %s, retried complete answered %s", aws.ToString(obj.ETag), aws.ToString(retry.ETag))
	}
	again, err := completeUpload(t.Context(), w.c, w.bucket, key, id, parts)
	if err != nil {
		t.Fatalf("complete once more: %v", err)
	}
	requireSameCompletion(t, retry, again)
	rec = requireCompletedSession(t, w.store, w.bucket, id, aws.ToString(obj.ETag))
	if _, ok := rec.transitioned("active", "completing"); !ok {
		t.Fatalf("history %s", rec.path())
	}
}

// TestSessionsCompleteInFlight sends a second complete (the same parts) while
// the first is still in flight, orders what MinIO sees with the fault proxy,
// and checks that the outcome is one S3 could give: the first complete
// fails because a part is missing, the part arrives, and the second
// complete must then either be refused (it raced the first) or succeed and
// leave the upload completed, so that a later abort answers NoSuchUpload.
// It must never answer 200 while the session goes back to active, which
// lets an abort "succeed" on an upload whose object exists.
func TestSessionsCompleteInFlight(t *testing.T) {
	e, proxy := harness.StartWithFaultProxy(t, harness.Options{})
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	bucket := e.Bucket(t)
	key := "in-flight"
	p1 := harness.NewData(4201, 5*mib)
	p2 := harness.NewData(4202, 77)
	id := createUpload(t, c, bucket, key)
	parts := []s3types.CompletedPart{
		mustUploadPart(t, c, bucket, key, id, 1, p1.Section(0, p1.Size)),
		{PartNumber: aws.Int32(2), ETag: aws.String(`"` + md5Hex(p2.Bytes()) + `"`)},
	}
	parts[0].ChecksumCRC32 = nil
	completeAsync := func() chan asyncComplete { return completeInBackground(t, c, bucket, key, id, parts) }
	isComplete := harness.MatchUpload(http.MethodPost, id)

	// The first complete reaches MinIO before part 2 exists, and its
	// answer (InvalidPart) is held on the way back.
	release1 := make(chan struct{})
	proxy.Inject(harness.Rule{Match: isComplete, Fault: harness.HoldResponse, Times: 1, Until: release1})
	first := completeAsync()
	eventually(t, sessionWait, func() (bool, string) {
		sent := proxy.Find(isComplete)
		return len(sent) == 1 && sent[0].Status != 0, "the first complete did not reach MinIO"
	})
	if st := proxy.Find(isComplete)[0].Status; st != http.StatusBadRequest {
		t.Fatalf("MinIO answered the first complete %d, want 400 InvalidPart", st)
	}
	store.requireState(t, bucket, id, "completing")

	// A second complete while the first is in flight: if the gateway
	// sends it on, MinIO only gets it after part 2 has arrived.
	release2 := make(chan struct{})
	hold2 := proxy.Inject(harness.Rule{Match: isComplete, Fault: harness.HoldRequest, Times: 1, Until: release2})
	second := completeAsync()
	var r2 asyncComplete
	secondDone := false
	eventually(t, sessionWait, func() (bool, string) {
		select {
		case r2 = <-second:
			secondDone = true
		default:
		}
		return secondDone || hold2.Hits() == 1, "the second complete neither answered nor reached the proxy"
	})
	// Part 2 now. A gateway that refuses parts while a complete is in
	// flight gets it once the first complete has failed.
	_, err := uploadPart(t.Context(), c, bucket, key, id, 2, p2.Section(0, p2.Size))
	partLater := err != nil
	if code := apiErrorCode(err); partLater && code != "OperationAborted" && code != "NoSuchUpload" {
		t.Fatalf("part 2 while a complete is in flight: %v", err)
	}
	close(release1)
	r1 := <-first
	requireAPIError(t, r1.err, "InvalidPart")
	if partLater {
		mustUploadPart(t, c, bucket, key, id, 2, p2.Section(0, p2.Size))
	}
	close(release2)
	if !secondDone {
		r2 = <-second
	}

	if r2.err == nil {
		// The second complete succeeded: the upload is completed, for
		// good.
		sum, size := concatSum(t, p1.Reader(), p2.Reader())
		obj := requireObjectSum(t, direct, bucket, key, sum, size)
		rec := store.session(t, bucket, id)
		if rec.State != "completed" {
			t.Errorf("the complete answered 200 and the object exists, but the session is %s (history %s)", rec.State, rec.path())
		}
		err := abortUpload(t.Context(), c, bucket, key, id)
		if code := apiErrorCode(err); code != "NoSuchUpload" {
			rec := store.session(t, bucket, id)
			t.Fatalf("abort after a complete that answered 200 (ETag %s, object ETag %s): %v; want NoSuchUpload. The session is now %s (history %s): "+
				"both the complete and the abort won", aws.ToString(r2.out.ETag), aws.ToString(obj.ETag), err, rec.State, rec.path())
		}
		requireCompletedSession(t, store, bucket, id, aws.ToString(obj.ETag))
		return
	}
	// The second complete was refused while the first was in flight: the
	// upload is untouched and takes an abort.
	if code := apiErrorCode(r2.err); code != "OperationAborted" && code != "SlowDown" && code != "ServiceUnavailable" {
		t.Fatalf("the second complete: %v, want success or a refusal to retry", r2.err)
	}
	requireAbsent(t, direct, bucket, key)
	store.requireState(t, bucket, id, "active")
	if err := abortUpload(t.Context(), c, bucket, key, id); err != nil {
		t.Fatal(err)
	}
	requireUploadGone(t, direct, bucket, key, id)
}

// asyncComplete is the outcome of a complete sent in the background.
type asyncComplete struct {
	out *s3.CompleteMultipartUploadOutput
	err error
}

// completeInBackground sends the complete of upload id of key with parts,
// and returns the channel its outcome arrives on.
func completeInBackground(t *testing.T, c *s3.Client, bucket, key, id string, parts []s3types.CompletedPart) chan asyncComplete {
	ch := make(chan asyncComplete, 1)
	go func() {
		out, err := completeUpload(t.Context(), c, bucket, key, id, parts)
		ch <- asyncComplete{out, err}
	}()
	return ch
}

// requireSameCompletion checks that two answers to the same complete agree.
func requireSameCompletion(t *testing.T, a, b *s3.CompleteMultipartUploadOutput) {
	t.Helper()
	type view struct{ ETag, Location, Bucket, Key, VersionID string }
	va := view{aws.ToString(a.ETag), aws.ToString(a.Location), aws.ToString(a.Bucket), aws.ToString(a.Key), aws.ToString(a.VersionId)}
	vb := view{aws.ToString(b.ETag), aws.ToString(b.Location), aws.ToString(b.Bucket), aws.ToString(b.Key), aws.ToString(b.VersionId)}
	if va != vb {
		t.Fatalf("two answers to one complete differ:\n  %+v\n  %+v", va, vb)
	}
}

func faultsOf(rs []harness.ProxiedRequest) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Fault.String())
	}
	return out
}

// TestSessionsCrash kills sweepgate (through its test fault hook) between
// recording an intent and calling MinIO, and checks that after a restart
// the reconciler finishes the abort, and that a completing upload is kept
// for the client's retry.
func TestSessionsCrash(t *testing.T) {
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	e := harness.Start(t, harness.Options{
		Config: map[string]any{"sessions": map[string]any{"reconcile_interval": "200ms", "reconcile_after": "100ms", "complete_hold": "2s"}},
		Env:    []string{"SWEEPGATE_TEST_FAULT=abort.after-intent"},
	})
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	bucket := e.Bucket(t)
	part := harness.NewData(4101, 5*mib)
	tail := harness.NewData(4102, 99)

	crash := func(t *testing.T, call func() error) {
		t.Helper()
		if err := call(); err == nil {
			t.Fatal("the call succeeded; the fault hook should have killed the gateway first")
		}
		if err := e.Gateway.WaitExit(t.Context(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("abort", func(t *testing.T) {
		key := "crash/abort"
		id := createUpload(t, c, bucket, key)
		mustUploadPart(t, c, bucket, key, id, 1, part.Section(0, part.Size))
		mustUploadPart(t, c, bucket, key, id, 2, tail.Section(0, tail.Size))
		crash(t, func() error { return abortUpload(t.Context(), c, bucket, key, id) })
		if !slices.Contains(backendUploads(t, direct, bucket), id) {
			t.Fatal("MinIO no longer holds the upload; the gateway died before aborting it")
		}
		e.Gateway.RestartWithEnv()
		rec := store.waitState(t, bucket, id, "aborted")
		if h, ok := rec.transitioned("active", "aborting"); !ok || h.Actor != "gateway" {
			t.Fatalf("history %s: want the gateway's active->aborting intent", rec.path())
		}
		if last := rec.History[len(rec.History)-1]; last.Actor != "reconciler" {
			t.Fatalf("history %s: want the reconciler to have recorded the end", rec.path())
		}
		requireUploadGone(t, direct, bucket, key, id)
		requireNoUploads(t, direct, bucket)
		if err := abortUpload(t.Context(), c, bucket, key, id); err != nil {
			t.Fatalf("the client's retry of its abort: %v, want 204", err)
		}
	})

	t.Run("complete", func(t *testing.T) {
		e.Gateway.RestartWithEnv("SWEEPGATE_TEST_FAULT=complete.after-intent")
		key := "crash/complete"
		id := createUpload(t, c, bucket, key)
		parts := []s3types.CompletedPart{
			mustUploadPart(t, c, bucket, key, id, 1, part.Section(0, part.Size)),
			mustUploadPart(t, c, bucket, key, id, 2, tail.Section(0, tail.Size)),
		}
		crash(t, func() error {
			_, err := completeUpload(t.Context(), c, bucket, key, id, parts)
			return err
		})
		e.Gateway.RestartWithEnv()
		// The complete never reached MinIO: the reconciler finds no object
		// and leaves the session completing, never reverting or deleting
		// it, and the upload stays on MinIO for the client's retry.
		store.requireState(t, bucket, id, "completing")
		if got := backendPartNumbers(t, direct, bucket, key, id); len(got) != 2 {
			t.Fatalf("MinIO holds parts %v of the completing upload, want 1 and 2", got)
		}
		// The dead gateway's hold on the complete lasts complete_hold:
		// until then a retry is told to try again (its complete might still
		// be running on MinIO), then it goes through.
		var out *s3.CompleteMultipartUploadOutput
		deadline := time.Now().Add(15 * time.Second)
		for {
			var err error
			out, err = completeUpload(t.Context(), c, bucket, key, id, parts)
			if err == nil {
				break
			}
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "OperationAborted" || time.Now().After(deadline) {
				t.Fatalf("the client's retry of its complete: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		sum, size := concatSum(t, part.Reader(), tail.Reader())
		requireObjectSum(t, direct, bucket, key, sum, size)
		requireCompletedSession(t, store, bucket, id, aws.ToString(out.ETag))
	})
}
