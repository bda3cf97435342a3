//go:build integration

package gateway

// The differential suite: generated requests go through an in-process
// gateway to a real MinIO, and MinIO's own trace of the S3 API calls it
// executed (attributed to gateway requests by the X-Sweepgate-Request-Id
// header on every backend request) is compared with the operation the
// gateway classified each request as. It proves "one meaning per request":
// the backend executes the operation the gateway decided on (plus the
// gateway's own listed helper calls), and a refused request reaches the
// backend not at all. After the run, the protected targets (another
// principal's upload, a referenced blob, the manifest naming it, a guarded
// blob) are checked directly on MinIO and in etcd.
//
// SWEEPGATE_DIFFERENTIAL_REQUESTS sets the number of generated requests
// (default 2000), SWEEPGATE_DIFFERENTIAL_SEED the seed (default: the
// clock; it is printed either way).

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/s3op"
)

const (
	diffPlainBucket   = "diff-plain"
	diffRegBucket     = "diff-reg"
	diffMissingBucket = "diff-missing"
	diffBlobPrefix    = "blobs/sha256/"
	diffSourcePrefix  = "manifests/"
	// diffUploadKey is where the owner's protected upload is in progress.
	diffUploadKey = "uploads/protected"
	// diffReservedPrefix is the gateway's reserved key prefix (the
	// restore witness's).
	diffReservedPrefix = ".sweepgate-witness/"
	// diffMineKey is where mallory's own upload is in progress.
	diffMineKey = "mp/mine"

	diffMallory = "mallory" // the ordinary principal every generated request is signed by
	diffOwner   = "owner"   // the principal whose upload is protected
	diffAdmin   = "diffadmin"

	// diffTimeout bounds each generated request: no S3 call on these small
	// objects takes nearly as long.
	diffTimeout = 5 * time.Second

	diffRequestsEnv = "SWEEPGATE_DIFFERENTIAL_REQUESTS"
	diffSeedEnv     = "SWEEPGATE_DIFFERENTIAL_SEED"
	diffDefaultRuns = 2000
	// diffNumberHeader carries a generated request's number from the client
	// to diffFront, which removes it before the gateway sees the request.
	diffNumberHeader = "X-Differential-Request"
)

// diffOpCalls maps a gateway operation (by its name) to the MinIO
// handler(s) that execute that S3 API, as MinIO's cmd/api-router.go names
// them in its trace ("s3." + handler name without "Handler"). Operations
// not listed map to "s3." + their own name (compared without regard to
// case, so s3op.GetObjectAcl matches s3.GetObjectACL).
var diffOpCalls = map[string][]string{
	"CreateBucket":                       {"s3.PutBucket"},
	"ListObjects":                        {"s3.ListObjectsV1"},
	"DeleteObjects":                      {"s3.DeleteMultipleObjects"},
	"CreateMultipartUpload":              {"s3.NewMultipartUpload"},
	"UploadPart":                         {"s3.PutObjectPart"},
	"UploadPartCopy":                     {"s3.CopyObjectPart"},
	"ListParts":                          {"s3.ListObjectParts"},
	"RestoreObject":                      {"s3.PostRestoreObject"},
	"GetObjectLockConfiguration":         {"s3.GetBucketObjectLockConfig"},
	"PutObjectLockConfiguration":         {"s3.PutBucketObjectLockConfig"},
	"GetBucketObjectLockConfiguration":   {"s3.GetBucketObjectLockConfig"},
	"PutBucketObjectLockConfiguration":   {"s3.PutBucketObjectLockConfig"},
	"GetBucketReplication":               {"s3.GetBucketReplicationConfig"},
	"PutBucketReplication":               {"s3.PutBucketReplicationConfig"},
	"DeleteBucketReplication":            {"s3.DeleteBucketReplicationConfig"},
	"GetBucketNotificationConfiguration": {"s3.GetBucketNotification"},
	"PutBucketNotificationConfiguration": {"s3.PutBucketNotification"},
	"GetBucketLifecycleConfiguration":    {"s3.GetBucketLifecycle"},
	"PutBucketLifecycleConfiguration":    {"s3.PutBucketLifecycle"},
	"GetBucketAccelerateConfiguration":   {"s3.GetBucketAccelerate"},
	"ListenBucketNotification":           {"s3.ListenNotification"},
}

// diffHelperCalls are the backend calls the gateway itself makes while
// serving an operation, besides the operation's own call (read from
// digests/*.go, gateway/deleteobjects.go and multipart/*.go):
//
//   - PutObject into a reference source: a HEAD settles an unclear
//     outcome (writeOutcome).
//   - CopyObject into a reference source: a GET reads the copy source
//     (copyRef), a HEAD settles an unclear outcome. Onto a blob's key in a
//     verifying namespace: a GET reads and hashes the copy source before
//     the copy is sent (copyBlob).
//   - CompleteMultipartUpload into a reference source: ListParts sizes
//     the upload (listedPartsSize), a GET and a HEAD record the completed
//     object's references (recordCompleted). Onto a blob's key in a
//     verifying namespace: a GET hashes what the complete made or what the
//     key already holds, and a HEAD and a DeleteObject remove a completed
//     object that does not hash to its digest (removeCompleted); when the
//     key holds the blob already, an AbortMultipartUpload ends the
//     request's own upload (abortStored).
//   - DeleteObject of a reference object and DeleteObjects naming one: a
//     HEAD says whether the object is still there (stillThere).
//   - A write or delete of a reference object asks the bucket's
//     versioning; in a bucket that may hold versions it lists the key's
//     versions and reads them (settleVersions, digests/versions.go).
//   - CreateMultipartUpload: an AbortMultipartUpload of the upload this
//     request created, when its session could not be recorded.
//
// A mutating helper call (diffMutating) must act on the request's own
// object, and on its own upload when it names one.
var diffHelperCalls = map[string][]string{
	"PutObject":               {"s3.HeadObject", "s3.GetBucketVersioning", "s3.ListObjectVersions", "s3.GetObject"},
	"CopyObject":              {"s3.GetObject", "s3.HeadObject", "s3.GetBucketVersioning", "s3.ListObjectVersions"},
	"CompleteMultipartUpload": {"s3.ListObjectParts", "s3.GetObject", "s3.HeadObject", "s3.DeleteObject", "s3.AbortMultipartUpload", "s3.GetBucketVersioning", "s3.ListObjectVersions"},
	"DeleteObject":            {"s3.HeadObject", "s3.GetBucketVersioning", "s3.ListObjectVersions", "s3.GetObject"},
	"DeleteObjects":           {"s3.HeadObject", "s3.GetBucketVersioning", "s3.ListObjectVersions", "s3.GetObject"},
	"CreateMultipartUpload":   {"s3.AbortMultipartUpload"},
}

// diffMutating are the MinIO handlers that change stored data or
// configuration.
var diffMutating = map[string]bool{}

func init() {
	for _, f := range []string{
		"PutBucket", "DeleteBucket", "DeleteMultipleObjects", "PutObject", "CopyObject",
		"DeleteObject", "NewMultipartUpload", "PutObjectPart", "CopyObjectPart",
		"CompleteMultipartUpload", "AbortMultipartUpload", "PutObjectACL", "PutObjectTagging",
		"DeleteObjectTagging", "PutObjectRetention", "PutObjectLegalHold", "PostRestoreObject",
		"PutObjectExtract", "PostPolicyBucket", "PutBucketACL", "PutBucketCors", "DeleteBucketCors",
		"DeleteBucketWebsite", "DeleteBucketTagging", "PutBucketLifecycle", "PutBucketReplicationConfig",
		"PutBucketEncryption", "PutBucketPolicy", "PutBucketObjectLockConfig", "PutBucketTagging",
		"PutBucketVersioning", "PutBucketNotification", "ResetBucketReplicationStart",
		"DeleteBucketPolicy", "DeleteBucketReplicationConfig", "DeleteBucketLifecycle",
		"DeleteBucketEncryption", "ResetBucketReplicationStatus",
	} {
		diffMutating["s3."+f] = true
	}
}

// diffOwnCalls returns the MinIO handlers that execute op itself.
func diffOwnCalls(op string) []string {
	if calls, ok := diffOpCalls[op]; ok {
		return calls
	}
	return []string{"s3." + op}
}

// diffRefused is the operation of a request the gateway refuses before
// the backend sees it.
const diffRefused = "Unsupported"

// diffRuns returns the number of requests to generate.
func diffRuns(t *testing.T) int {
	if s := os.Getenv(diffRequestsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number", diffRequestsEnv, s)
		}
		return n
	}
	return diffDefaultRuns
}

func diffSeed(t *testing.T) uint64 {
	if s := os.Getenv(diffSeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a number", diffSeedEnv, s)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// run sends n generated requests from seed (after the fixed ones) through
// the gateway, and checks each against MinIO's trace and, at the end, the
// protected targets.
func (w *diffWorld) run(seed uint64, n int, fixed []*diffRequest) *diffReport {
	t := w.t
	start := time.Now()
	gen := &diffGen{w: w, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), apis: diffAPIs()}
	reqs := slices.Clone(fixed)
	for i := range reqs {
		reqs[i].n = -(i + 1)
	}
	for range n {
		reqs = append(reqs, gen.next())
	}
	trace := harness.StartTrace(t, w.minio)
	before := trace.Len()

	outcomes := w.sendAll(reqs)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := trace.Sync(ctx); err != nil {
		t.Fatalf("trace: %v", err)
	}
	entries := trace.Entries()[before:]
	byID := map[string][]harness.TraceEntry{}
	var unattributed []harness.TraceEntry
	for _, e := range entries {
		switch {
		case harness.IsTraceSync(e), strings.HasPrefix(e.Path, "/minio/"):
		case e.RequestID == "":
			unattributed = append(unattributed, e)
		default:
			byID[e.RequestID] = append(byID[e.RequestID], e)
		}
	}

	rep := &diffReport{seed: seed, requests: len(reqs), routedAway: map[string]int{}, ops: map[string]int{}, refusals: map[string]int{}}
	seen := map[string]bool{}
	for i, o := range outcomes {
		o.id = w.front.id(i)
		if o.id == "" {
			o.id = w.logs.idOf(diffRemote(i))
		}
		o.op, _ = w.logs.op(o.id)
		o.calls = byID[o.id]
		seen[o.id] = true
		rep.ops[o.op]++
		rep.calls += len(o.calls)
		if len(o.calls) > 0 {
			rep.forwarded++
		}
		if o.op == diffRefused {
			rep.refused++
			code := "(no answer)"
			if o.resp != nil {
				code = fmt.Sprintf("%d %s", o.resp.status, o.resp.code)
			}
			rep.refusals[code]++
		}
		if len(o.req.control) > 0 {
			if o.op == diffRefused {
				rep.controlRefused++
			} else {
				rep.controlPassed++
			}
		}
		o.bad = diffCheckOutcome(o, rep.routedAway)
		for _, m := range o.bad {
			if notes := w.logs.notesOf(o.id); len(notes) > 0 {
				m += "\n    gateway log: " + strings.Join(notes, "\n    gateway log: ")
			}
			rep.mismatches = append(rep.mismatches, m)
		}
	}
	for id, es := range byID {
		if !seen[id] {
			for _, e := range es {
				rep.mismatches = append(rep.mismatches, fmt.Sprintf("MinIO executed %s for gateway request %s, which is none of the generated ones", e, id))
			}
		}
	}
	for _, e := range unattributed {
		rep.mismatches = append(rep.mismatches, fmt.Sprintf("MinIO executed %s without a %s header", e, harness.TraceRequestIDHeader))
	}
	rep.outcomes = outcomes
	rep.damage = w.checkProtected(entries, outcomes)
	rep.duration = time.Since(start)
	return rep
}

// sendAll sends reqs through the gateway, eight at a time, as Mallory, and
// returns their outcomes in the same order.
func (w *diffWorld) sendAll(reqs []*diffRequest) []*diffOutcome {
	t := w.t
	outcomes := make([]*diffOutcome, len(reqs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				q := reqs[i]
				timeout := diffTimeout
				if strings.Contains(q.rawQuery, "events") {
					timeout = time.Second // ListenNotification streams until the client goes
				}
				ctx, cancel := context.WithTimeout(t.Context(), timeout)
				resp, err := w.send(ctx, q, diffMallory, i)
				cancel()
				outcomes[i] = &diffOutcome{req: q, resp: resp, err: err}
			}
		})
	}
	for i := range reqs {
		work <- i
	}
	close(work)
	wg.Wait()
	return outcomes
}

// diffFixed are requests every run sends first: the mix-ups the suite
// exists for, so that even a short run has them.
func (w *diffWorld) diffFixed() []*diffRequest {
	obj := func(method, bucket, key, rawQuery string, header http.Header, body []byte) *diffRequest {
		p := "/" + bucket + "/" + key
		if header == nil {
			header = http.Header{}
		}
		return &diffRequest{method: method, path: p, rawPath: backend.EscapePath(p), rawQuery: rawQuery, header: header, body: body, target: "fixed", shape: "canonical"}
	}
	deletes := func(bucket string, keys ...string) *diffRequest {
		var b strings.Builder
		b.WriteString("<Delete>")
		for _, k := range keys {
			fmt.Fprintf(&b, "<Object><Key>%s</Key></Object>", k)
		}
		b.WriteString("</Delete>")
		sum := md5.Sum([]byte(b.String()))
		q := &diffRequest{method: http.MethodPost, path: "/" + bucket, rawPath: "/" + bucket, rawQuery: "delete", body: []byte(b.String()),
			header: http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(sum[:])}}, target: "fixed", shape: "-"}
		for _, k := range keys {
			q.badBodyKey = q.badBodyKey || diffBadKey(k)
		}
		return q
	}
	// A listing with a control character in its filters (ceph's s3-tests'
	// *_unreadable listings), and control characters in the parameters
	// that select an operation: a DELETE whose uploadId MinIO's router
	// did not see would delete the object instead of aborting the upload.
	bucket := func(method, bucket, rawQuery, listing string, control ...string) *diffRequest {
		return &diffRequest{method: method, path: "/" + bucket, rawPath: "/" + bucket, rawQuery: rawQuery, header: http.Header{},
			target: "fixed", shape: "-", listing: listing, control: control}
	}
	controlled := func(q *diffRequest, control ...string) *diffRequest {
		q.control = control
		return q
	}
	up := url.QueryEscape(w.uploadID)
	mine := url.QueryEscape(w.mineID)
	copyHdr := http.Header{"X-Amz-Copy-Source": {"/" + diffPlainBucket + "/obj"}}
	return []*diffRequest{
		obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId="+up+"&tagging", nil, nil),
		obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId="+up+"&acl", nil, nil),
		obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId="+up, nil, nil),
		// An empty upload id names no upload to the gateway; MinIO's abort
		// of it removes every upload of the key.
		obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId=", nil, nil),
		obj(http.MethodPost, diffRegBucket, w.freeBlobKey, "uploadId=", nil,
			[]byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"0cc175b9c0f1b6a831c399e269772661"</ETag></Part></CompleteMultipartUpload>`)),
		obj(http.MethodDelete, diffPlainBucket, diffMineKey, "tagging&uploadId="+mine, nil, nil),
		obj(http.MethodDelete, diffPlainBucket, "gen/other", "uploadId="+mine+"&versionId=null", nil, nil),
		obj(http.MethodPut, diffRegBucket, w.manifest.key, "retention", copyHdr, nil),
		obj(http.MethodPut, diffRegBucket, w.manifest.key, "legal-hold", copyHdr, nil),
		obj(http.MethodPut, diffRegBucket, w.refBlob.key, "retention", copyHdr, nil),
		obj(http.MethodPost, diffRegBucket, diffUploadKey, "uploadId="+up+"&select&select-type=2", nil, nil),
		obj(http.MethodGet, diffRegBucket, w.guardBlob.key, "lambdaArn=arn%3Aminio%3As3-object-lambda%3A%3Afn%3Awebhook", nil, nil),
		bucket(http.MethodGet, diffPlainBucket, "delimiter=%0A", "ListObjects", "delimiter"),
		bucket(http.MethodGet, diffPlainBucket, "marker=%0A", "ListObjects", "marker"),
		bucket(http.MethodGet, diffPlainBucket, "list-type=2&delimiter=%0A", "ListObjectsV2", "delimiter"),
		bucket(http.MethodGet, diffPlainBucket, "list-type=2&prefix=%0A", "ListObjectsV2", "prefix"),
		bucket(http.MethodGet, diffPlainBucket, "list-type=2&start-after=%0A", "ListObjectsV2", "start-after"),
		bucket(http.MethodGet, diffRegBucket, "list-type=2&continuation-token=%01&prefix=%0D%0A", "ListObjectsV2", "continuation-token", "prefix"),
		bucket(http.MethodGet, diffRegBucket, "versions&prefix=%09&delimiter=%0A&key-marker=%7F&version-id-marker=%00", "ListObjectVersions", "prefix", "delimiter", "key-marker", "version-id-marker"),
		bucket(http.MethodGet, diffRegBucket, "uploads&prefix=uploads%0A&delimiter=%0A&key-marker=%0A&upload-id-marker=%0A", "ListMultipartUploads", "prefix", "delimiter", "key-marker", "upload-id-marker"),
		bucket(http.MethodGet, diffPlainBucket, "list-type=2%0A&prefix=%0A", "", "list-type", "prefix"),
		bucket(http.MethodGet, diffRegBucket, "uploads=%0A&prefix=%0A", "", "uploads", "prefix"),
		bucket(http.MethodGet, diffRegBucket, "versions=%0D", "", "versions"),
		bucket(http.MethodGet, diffPlainBucket, "list-type=2&encoding-type=url%0A", "", "encoding-type"),
		bucket(http.MethodPost, diffPlainBucket, "delete=%0A", "", "delete"),
		bucket(http.MethodGet, diffPlainBucket, "tagging=%0A&prefix=%0A", "", "tagging", "prefix"),
		controlled(obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId="+up+"%0A", nil, nil), "uploadId"),
		controlled(obj(http.MethodDelete, diffRegBucket, diffUploadKey, "uploadId=%0A"+up, nil, nil), "uploadId"),
		controlled(obj(http.MethodDelete, diffPlainBucket, "obj", "tagging=%0A", nil, nil), "tagging"),
		controlled(obj(http.MethodPut, diffPlainBucket, diffMineKey, "partNumber=1%0A&uploadId="+mine, nil, []byte("part")), "partNumber"),
		controlled(obj(http.MethodGet, diffPlainBucket, "obj", "prefix=%0A", nil, nil), "prefix"),
		controlled(obj(http.MethodPost, diffPlainBucket, diffMineKey, "uploads=%0A", nil, nil), "uploads"),
		deletes(diffRegBucket, "/"+w.refBlob.key),
		deletes(diffRegBucket, "blobs/./sha256/"+strings.TrimPrefix(w.refBlob.key, diffBlobPrefix)),
		deletes(diffPlainBucket, "/obj"),
		// MinIO cleans "gen/./wedge" to "gen/wedge" and then waits for its
		// own lock on that name: the request, and every later one on it,
		// hangs.
		deletes(diffPlainBucket, "gen/wedge", "gen/./wedge"),
	}
}

func TestDifferentialOneMeaning(t *testing.T) {
	w := newDiffWorld(t)
	seed := diffSeed(t)
	t.Logf("seed %d", seed)
	rep := w.run(seed, diffRuns(t), w.diffFixed())
	rep.log(t)
	if len(rep.mismatches) > 0 || len(rep.damage) > 0 {
		t.Errorf("%d mismatches (a call MinIO executed that the gateway's classification does not allow, a request MinIO saw that the gateway must refuse, or a request left unanswered), %d protected targets changed; %s=%d repeats this run", len(rep.mismatches), len(rep.damage), diffSeedEnv, seed)
	}
}

// TestDifferentialDetectsBrokenRow breaks one row of operationRules the
// way a plausible edit would (the AbortMultipartUpload row is gone and
// DeleteObject accepts uploadId, so DELETE ?uploadId= is classified
// DeleteObject while MinIO aborts the upload) and requires the suite to
// report it: as mismatches, and as the owner's upload aborted.
func TestDifferentialDetectsBrokenRow(t *testing.T) {
	saved := operationRules
	t.Cleanup(func() { operationRules = saved })
	var broken []operationRule
	for _, rule := range saved {
		switch rule.op {
		case s3op.AbortMultipartUpload:
			continue
		case s3op.DeleteObject:
			rule.params = append(slices.Clone(rule.params), "uploadId")
		}
		broken = append(broken, rule)
	}
	if len(broken) != len(saved)-1 {
		t.Fatalf("operationRules has no AbortMultipartUpload row to drop")
	}
	operationRules = broken

	w := newDiffWorld(t)
	rep := w.run(1, 300, w.diffFixed())
	rep.log(t)
	found := 0
	for _, o := range rep.outcomes {
		if o.op != string(s3op.DeleteObject) || len(o.bad) == 0 {
			continue
		}
		if slices.ContainsFunc(o.calls, func(c harness.TraceEntry) bool { return c.FuncName == "s3.AbortMultipartUpload" }) {
			found++
		}
	}
	if found == 0 {
		t.Errorf("no mismatch reported for a DeleteObject that MinIO executed as AbortMultipartUpload")
	}
	if !slices.ContainsFunc(rep.damage, func(d string) bool { return strings.HasPrefix(d, "owner's upload") }) {
		t.Errorf("the owner's upload was not reported changed; damage: %q", rep.damage)
	}
	t.Logf("the broken row was reported: %d DeleteObject requests executed as AbortMultipartUpload, %d mismatches in all, %d protected targets changed", found, len(rep.mismatches), len(rep.damage))
}

// diffMinIOHandlers are the S3 API handlers MinIO's router
// (cmd/api-router.go of the pinned MinIO) registers, as its trace names
// them.
var diffMinIOHandlers = strings.Fields(`
	s3.AbortMultipartUpload s3.CompleteMultipartUpload s3.CopyObject s3.CopyObjectPart s3.DeleteBucket
	s3.DeleteBucketCors s3.DeleteBucketEncryption s3.DeleteBucketLifecycle s3.DeleteBucketPolicy
	s3.DeleteBucketReplicationConfig s3.DeleteBucketTagging s3.DeleteBucketWebsite s3.DeleteMultipleObjects
	s3.DeleteObject s3.DeleteObjectTagging s3.GetBucketACL s3.GetBucketAccelerate s3.GetBucketCors
	s3.GetBucketEncryption s3.GetBucketLifecycle s3.GetBucketLocation s3.GetBucketLogging
	s3.GetBucketNotification s3.GetBucketObjectLockConfig s3.GetBucketPolicy s3.GetBucketPolicyStatus
	s3.GetBucketReplicationConfig s3.GetBucketReplicationMetrics s3.GetBucketReplicationMetricsV2
	s3.GetBucketRequestPayment s3.GetBucketTagging s3.GetBucketVersioning s3.GetBucketWebsite s3.GetObject
	s3.GetObjectACL s3.GetObjectAttributes s3.GetObjectLambda s3.GetObjectLegalHold s3.GetObjectRetention
	s3.GetObjectTagging s3.HeadBucket s3.HeadObject s3.ListBuckets s3.ListMultipartUploads s3.ListObjectParts
	s3.ListObjectVersions s3.ListObjectVersionsM s3.ListObjectsV1 s3.ListObjectsV2 s3.ListObjectsV2M
	s3.ListenNotification s3.NewMultipartUpload s3.PostPolicyBucket s3.PostRestoreObject s3.PutBucket
	s3.PutBucketACL s3.PutBucketCors s3.PutBucketEncryption s3.PutBucketLifecycle s3.PutBucketNotification
	s3.PutBucketObjectLockConfig s3.PutBucketPolicy s3.PutBucketReplicationConfig s3.PutBucketTagging
	s3.PutBucketVersioning s3.PutObject s3.PutObjectACL s3.PutObjectExtract s3.PutObjectLegalHold
	s3.PutObjectPart s3.PutObjectRetention s3.PutObjectTagging s3.ResetBucketReplicationStart
	s3.ResetBucketReplicationStatus s3.SelectObjectContent s3.ValidateBucketReplicationCreds
`)

// TestDifferentialOperationNames checks the suite's expectation table
// against operationRules without a backend: every operation the gateway
// serves, and every helper call listed, names a handler MinIO has, so that
// a new row fails here rather than as a flood of mismatches.
func TestDifferentialOperationNames(t *testing.T) {
	known := map[string]bool{}
	for _, h := range diffMinIOHandlers {
		known[strings.ToLower(h)] = true
	}
	for _, rule := range operationRules {
		for _, c := range diffOwnCalls(string(rule.op)) {
			if !known[strings.ToLower(c)] {
				t.Errorf("operation %s: MinIO has no handler %s; name its handler in diffOpCalls", rule.op, c)
			}
		}
	}
	for op, calls := range diffHelperCalls {
		for _, c := range calls {
			if !known[strings.ToLower(c)] {
				t.Errorf("helper call %s of %s: MinIO has no such handler", c, op)
			}
		}
	}
	for c := range diffMutating {
		if !known[strings.ToLower(c)] {
			t.Errorf("mutating call %s: MinIO has no such handler", c)
		}
	}
}

// TestDifferentialDetectsControlInSelector lets a control character
// through in the parameter that selects AbortMultipartUpload, as a
// careless widening of listingFilters would, and requires the suite to
// report it: MinIO's router does not see "uploadId=ID\n" (its patterns do
// not match across a line break), so it deletes the object instead of
// aborting the upload the gateway classified.
func TestDifferentialDetectsControlInSelector(t *testing.T) {
	saved := listingFilters
	t.Cleanup(func() { listingFilters = saved })
	listingFilters = maps.Clone(saved)
	listingFilters[s3op.AbortMultipartUpload] = []string{"uploadId"}

	w := newDiffWorld(t)
	rep := w.run(1, 0, w.diffFixed())
	rep.log(t)
	found := 0
	for _, o := range rep.outcomes {
		if o.op != string(s3op.AbortMultipartUpload) || !slices.Contains(o.req.control, "uploadId") || len(o.bad) == 0 {
			continue
		}
		if slices.ContainsFunc(o.calls, func(c harness.TraceEntry) bool { return c.FuncName == "s3.DeleteObject" }) {
			found++
		}
	}
	if found == 0 {
		t.Errorf("no mismatch reported for an AbortMultipartUpload with a line break in its uploadId that MinIO executed as DeleteObject")
	}
	t.Logf("the widened allow-list was reported: %d AbortMultipartUpload requests executed as DeleteObject, %d mismatches in all", found, len(rep.mismatches))
}
