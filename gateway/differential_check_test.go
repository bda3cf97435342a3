//go:build integration

package gateway

// The differential suite's checks: each outcome against what MinIO
// executed, the protected targets after the run, and the report.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3op"
)

// diffOutcome is what became of one generated request.
type diffOutcome struct {
	req   *diffRequest
	id    string // the gateway's request id
	op    string // the operation the gateway classified it as
	resp  *diffResponse
	err   error
	calls []harness.TraceEntry // what MinIO executed for it
	bad   []string             // the mismatches found in it
}

// diffReport is a run's result.
type diffReport struct {
	seed       uint64
	requests   int
	forwarded  int // requests MinIO saw at least one call for
	refused    int // requests the gateway classified Unsupported
	calls      int
	mismatches []string
	// routedAway counts forwarded requests that MinIO refused before any
	// S3 API ran (NotImplemented, MethodNotAllowed), by operation.
	routedAway map[string]int
	ops        map[string]int
	// refusals counts the gateway's refusals by error code.
	refusals map[string]int
	// controlPassed and controlRefused count the requests with a control
	// character in a query value that the gateway passed on and refused.
	controlPassed, controlRefused int
	// damage lists the protected targets that changed.
	damage   []string
	duration time.Duration
	outcomes []*diffOutcome
}

// diffCheckOutcome compares what the gateway classified with what MinIO
// executed for one request, and returns the mismatches.
func diffCheckOutcome(o *diffOutcome, routedAway map[string]int) []string {
	var bad []string
	q := o.req
	fail := func(format string, args ...any) {
		bad = append(bad, fmt.Sprintf("%s\n    gateway: id %s op %s -> %s\n    %s", q, o.id, o.op, o.respString(), fmt.Sprintf(format, args...)))
	}
	switch {
	case o.err != nil && o.id == "":
		fail("no answer and no gateway request id: %v", o.err)
		return bad
	case o.err != nil && !strings.Contains(q.rawQuery, "events"):
		fail("no answer: %v", o.err)
	case o.id == "":
		fail("the answer carries no gateway request id")
		return bad
	case o.op == "":
		fail("no request log line for the gateway's request id")
		return bad
	}
	var names []string
	for _, c := range o.calls {
		names = append(names, c.String())
	}
	diffCheckControl(o, fail)
	if o.op == diffRefused {
		if len(o.calls) > 0 {
			fail("refused by the gateway, yet MinIO executed %v", names)
		}
		return bad
	}
	if len(o.calls) > 0 && q.badKey {
		fail("the key has a leading \"/\", \"//\", or a \".\" or \"..\" segment, yet MinIO executed %v", names)
	}
	if len(o.calls) > 0 && q.badBodyKey && o.op == string(s3op.DeleteObjects) {
		fail("the body names a key with a leading \"/\", \"//\", or a \".\" or \"..\" segment, yet MinIO executed %v", names)
	}
	if len(o.calls) > 0 && q.badCopySource {
		fail("malformed or repeated copy source, yet MinIO executed %v", names)
	}
	own := map[string]bool{}
	for _, c := range diffOwnCalls(o.op) {
		own[strings.ToLower(c)] = true
	}
	helpers := map[string]bool{}
	for _, c := range diffHelperCalls[o.op] {
		helpers[strings.ToLower(c)] = true
	}
	for _, c := range o.calls {
		f := strings.ToLower(c.FuncName)
		switch {
		case !c.IsS3():
			// MinIO refused it before any S3 API ran: nothing executed.
			routedAway[o.op]++
		case own[f]:
		case helpers[f]:
			if diffMutating[c.FuncName] && !diffSameTarget(c, q) {
				fail("helper call %s acts on another object or upload than the request's", c)
			}
		default:
			fail("MinIO executed %s, which is neither %v nor a helper call of it", c, diffOwnCalls(o.op))
		}
	}
	return bad
}

// diffCheckControl checks a request whose query values hold control
// characters: a listing sent as S3 defines it, with them only in its
// filters, is passed on and executed by MinIO as that listing; one with
// them anywhere else is refused with a 400 S3 error; none is accepted as
// any other operation. (A request with a trick, a rerouting header or one
// of MinIO's control headers may be refused for that, before or after it
// is classified.)
func diffCheckControl(o *diffOutcome, fail func(string, ...any)) {
	q := o.req
	if len(q.control) == 0 {
		return
	}
	inFilters := func(op string) bool {
		for _, n := range q.control {
			if !slices.Contains(diffListingFilters[op], n) {
				return false
			}
		}
		return true
	}
	switch {
	case q.listing != "" && inFilters(q.listing) && o.op != q.listing:
		fail("a %s with a control character only in %v, which MinIO's router never reads: want it classified %s and passed on", q.listing, q.control, q.listing)
	case o.op == diffRefused:
		// A HEAD's error has no body to name its code; a trick (a ';',
		// an encoded name, a presigned URL) may be refused for itself
		// first, by the signature check among others.
		switch {
		case o.resp == nil:
			fail("a control character in %v: refused with no answer", q.control)
		case q.trick != "" || diffRoutingHeader(q):
			// Refused perhaps for the trick, or for the header that would
			// reroute it to a call the gateway does not serve.
			if o.resp.status/100 != 4 && o.resp.status != http.StatusNotImplemented {
				fail("a control character in %v, and a trick or a rerouting header: refused, but not with a 4xx or 501", q.control)
			}
		case o.resp.status != 400 || o.resp.code == "" && !strings.EqualFold(q.method, http.MethodHead):
			fail("a control character in %v: refused, but not with a 400 S3 error", q.control)
		}
	case diffMinIOControl(q) && o.resp != nil && o.resp.status == http.StatusBadRequest && len(o.calls) == 0:
		// Classified, then refused for MinIO's own control header
		// (checkBackendControls): nothing reached MinIO.
	case !inFilters(o.op):
		fail("a control character in %v: accepted as %s, which takes one only in %v", q.control, o.op, diffListingFilters[o.op])
	case q.trick == "" && !slices.ContainsFunc(o.calls, func(c harness.TraceEntry) bool {
		return slices.ContainsFunc(diffOwnCalls(o.op), func(own string) bool { return strings.EqualFold(own, c.FuncName) })
	}):
		fail("a control character in %v: accepted as %s, but MinIO did not execute %v", q.control, o.op, diffOwnCalls(o.op))
	}
}

// diffRoutingHeader reports whether q carries a header that makes MinIO
// route it to a call the gateway does not serve (an extract, an append, a
// form upload).
func diffRoutingHeader(q *diffRequest) bool {
	return q.header.Get("X-Amz-Meta-Snowball-Auto-Extract") != "" || q.header.Get("X-Amz-Write-Offset-Bytes") != "" ||
		strings.HasPrefix(q.header.Get("Content-Type"), "multipart/form-data")
}

// diffMinIOControl reports whether q carries one of MinIO's own control
// headers (X-Minio-*), which the gateway refuses whatever the request is.
func diffMinIOControl(q *diffRequest) bool {
	for name := range q.header {
		if strings.HasPrefix(strings.ToLower(name), "x-minio-") {
			return true
		}
	}
	return false
}

// diffSameTarget reports whether a traced call acts on q's object, and on
// q's upload when both name one.
func diffSameTarget(c harness.TraceEntry, q *diffRequest) bool {
	path, err := url.PathUnescape(c.Path)
	if err != nil || path != q.path {
		return false
	}
	cq, err1 := url.ParseQuery(c.RawQuery)
	rq, err2 := url.ParseQuery(q.rawQuery)
	if err1 != nil || err2 != nil {
		return false
	}
	return !cq.Has("uploadId") || !rq.Has("uploadId") || cq.Get("uploadId") == rq.Get("uploadId")
}

func (o *diffOutcome) respString() string {
	switch {
	case o.resp == nil:
		return fmt.Sprintf("no answer (%v)", o.err)
	case o.resp.code != "":
		return fmt.Sprintf("%d %s", o.resp.status, o.resp.code)
	}
	return strconv.Itoa(o.resp.status)
}

// checkProtected checks, on MinIO and in etcd, that the run changed no
// protected target. For a target that changed, it names the MinIO calls
// that acted on it.
func (w *diffWorld) checkProtected(entries []harness.TraceEntry, outcomes []*diffOutcome) []string {
	ctx := w.t.Context()
	var damage []string
	outcomeOf := map[string]*diffOutcome{}
	for _, o := range outcomes {
		outcomeOf[o.id] = o
	}
	// blame lists the mutating calls MinIO executed on p's object (as
	// sent, or as MinIO cleans it), and the DeleteObjects whose body
	// names it, with the requests they were made for.
	blame := func(p *diffProtected) string {
		var b strings.Builder
		for _, e := range entries {
			if !diffMutating[e.FuncName] {
				continue
			}
			dec, err := url.PathUnescape(e.Path)
			if err != nil {
				continue
			}
			onKey := strings.HasPrefix(dec, "/"+p.bucket+"/") && path.Clean("/"+strings.TrimPrefix(dec, "/"+p.bucket+"/")) == "/"+p.key
			inBody := e.FuncName == "s3.DeleteMultipleObjects" && dec == "/"+p.bucket && bytes.Contains(e.Body, []byte(path.Base(p.key)))
			if !onKey && !inBody {
				continue
			}
			fmt.Fprintf(&b, "\n    MinIO %s", e)
			if o := outcomeOf[e.RequestID]; o != nil {
				fmt.Fprintf(&b, " for %s, classified %s", o.req, o.op)
			} else {
				fmt.Fprintf(&b, " for gateway request %q", e.RequestID)
			}
		}
		return b.String()
	}
	for _, p := range []*diffProtected{w.refBlob, w.manifest, w.guardBlob, w.witness} {
		obj, err := w.direct.GetObject(ctx, p.bucket, p.key, minio.GetObjectOptions{})
		var got []byte
		if err == nil {
			got, err = io.ReadAll(obj)
			obj.Close()
		}
		switch {
		case err != nil:
			damage = append(damage, fmt.Sprintf("%s %s/%s: %v%s", p.name, p.bucket, p.key, err, blame(p)))
		case !bytes.Equal(got, p.body):
			damage = append(damage, fmt.Sprintf("%s %s/%s: holds %q, want %q%s", p.name, p.bucket, p.key, got, p.body, blame(p)))
		}
	}
	if rec, err := w.store.GetRefSource(ctx, w.manifest.bucket, w.manifest.key); err != nil || !slices.Equal(rec.Value.Digests, []string{w.refDigest}) {
		damage = append(damage, fmt.Sprintf("manifest's reference record: %+v, %v; want digests [%s]", rec.Value, err, w.refDigest))
	}
	if ok, err := w.store.Referenced(ctx, w.guardDigest, time.Now()); err != nil || ok {
		damage = append(damage, fmt.Sprintf("guarded digest %s: referenced %v (%v), want not referenced", w.guardDigest, ok, err))
	}
	if g, err := w.store.Guarded(ctx, w.guardDigest); err != nil || !g {
		damage = append(damage, fmt.Sprintf("guarded digest %s: guard armed %v (%v)", w.guardDigest, g, err))
	}

	upload := &diffProtected{name: "owner's upload", bucket: diffRegBucket, key: diffUploadKey}
	core := minio.Core{Client: w.direct}
	res, err := core.ListObjectParts(ctx, diffRegBucket, diffUploadKey, w.uploadID, 0, 1000)
	switch {
	case err != nil:
		damage = append(damage, fmt.Sprintf("owner's upload %s: %v%s", w.uploadID, err, blame(upload)))
	case !slices.EqualFunc(res.ObjectParts, w.uploadParts, func(a, b minio.ObjectPart) bool {
		return a.PartNumber == b.PartNumber && a.ETag == b.ETag && a.Size == b.Size
	}):
		damage = append(damage, fmt.Sprintf("owner's upload %s: parts %+v, want %+v%s", w.uploadID, res.ObjectParts, w.uploadParts, blame(upload)))
	}
	sess, err := w.store.GetSession(ctx, diffRegBucket, w.uploadID)
	if err != nil || sess.Value.State != etcdstore.StateActive || sess.Value.Owner != diffOwner {
		damage = append(damage, fmt.Sprintf("owner's upload %s: session state %q owner %q (%v), want active, %s", w.uploadID, sess.Value.State, sess.Value.Owner, err, diffOwner))
	}
	return damage
}

// log prints a run's figures and, when there are any, its mismatches
// (the first 60 in full, then one line per kind).
func (rep *diffReport) log(t *testing.T) {
	t.Helper()
	t.Logf("differential run: seed %d (%s=%d to repeat), %d requests in %v: %d reached MinIO (%d calls), %d refused by the gateway, %d mismatches, %d protected targets changed",
		rep.seed, diffSeedEnv, rep.seed, rep.requests, rep.duration.Round(time.Millisecond), rep.forwarded, rep.calls, rep.refused, len(rep.mismatches), len(rep.damage))
	var ops []string
	for op, n := range rep.ops {
		ops = append(ops, fmt.Sprintf("%s %d", op, n))
	}
	sort.Strings(ops)
	t.Logf("operations: %s", strings.Join(ops, ", "))
	var refusals []string
	for code, n := range rep.refusals {
		refusals = append(refusals, fmt.Sprintf("%s %d", code, n))
	}
	sort.Strings(refusals)
	t.Logf("refusals: %s", strings.Join(refusals, ", "))
	t.Logf("requests with a control character in a query value: %d passed on, %d refused", rep.controlPassed, rep.controlRefused)
	if len(rep.routedAway) > 0 {
		var ra []string
		for op, n := range rep.routedAway {
			ra = append(ra, fmt.Sprintf("%s %d", op, n))
		}
		sort.Strings(ra)
		t.Logf("forwarded but refused by MinIO's router (NotImplemented, MethodNotAllowed; nothing executed): %s", strings.Join(ra, ", "))
	}
	for i, m := range rep.mismatches {
		if i == 60 {
			t.Logf("... and %d more mismatches", len(rep.mismatches)-60)
			break
		}
		t.Logf("MISMATCH %s", m)
	}
	for _, d := range rep.damage {
		t.Logf("PROTECTED TARGET CHANGED: %s", d)
	}
}
