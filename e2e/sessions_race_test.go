//go:build e2e

package e2e

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The race test's operations on one upload.
const (
	opPart1    = "UploadPart(1)" // re-upload of the part every upload starts with
	opPart2    = "UploadPart(2)"
	opList     = "ListParts"
	opComplete = "Complete(1,2)"
	opAbort    = "Abort"
	opObserve  = "Observe" // the final state, read after every call returned
)

// raceInput is one call of the race test.
type raceInput struct {
	upload int
	op     string
}

// raceOutput is what the call answered: an HTTP status, the S3 error code,
// and for a complete the ETag. For opObserve, phase is the state found.
type raceOutput struct {
	status int
	code   string
	etag   string
	phase  string
}

func (o raceOutput) String() string {
	switch {
	case o.phase != "":
		return o.phase + " " + o.etag
	case o.code != "":
		return fmt.Sprintf("%d %s", o.status, o.code)
	case o.etag != "":
		return fmt.Sprintf("%d %s", o.status, o.etag)
	}
	return fmt.Sprint(o.status)
}

// raceState is the sequential model of one upload that starts with part 1
// uploaded: S3's semantics as the gateway promises them.
type raceState struct {
	phase string // active, completed or aborted
	part2 bool   // part 2 was uploaded
	etag  string // the completed object's ETag
}

// noOp reports an answer that says nothing was done and the client may
// retry: it is explained in any state and changes none. OperationAborted
// (409) is S3's "a conflicting operation is in progress": the answer to a
// call that meets a complete in flight.
func (o raceOutput) noOp() bool {
	return o.status == 503 && (o.code == "ServiceUnavailable" || o.code == "SlowDown") ||
		o.status == 409 && o.code == "OperationAborted"
}

// unknown reports a call that got no answer (a connection reset): it may or
// may not have happened. Even MinIO alone resets some connections that send
// a large part it refuses, when the client has begun sending the body.
func (o raceOutput) unknown() bool { return o.status < 0 }

// anyETag stands for the ETag of a complete whose answer was lost.
const anyETag = "?"

// raceStep is the model's step function: the states that explain the call's
// answer from state st (none when nothing does).
func raceStep(st raceState, in raceInput, out raceOutput) []raceState {
	if in.op != opObserve && out.noOp() {
		return []raceState{st}
	}
	active := st.phase == "active"
	if out.unknown() {
		after := []raceState{st}
		switch {
		case in.op == opPart2 && active:
			after = append(after, raceState{phase: "active", part2: true})
		case in.op == opComplete && active && st.part2:
			after = append(after, raceState{phase: "completed", part2: true, etag: anyETag})
		case in.op == opAbort && st.phase != "completed":
			after = append(after, raceState{phase: "aborted", part2: st.part2})
		}
		return after
	}
	ok := func(b bool, next raceState) []raceState {
		if b {
			return []raceState{next}
		}
		return nil
	}
	sameETag := func(etag string) bool { return st.etag == anyETag || st.etag == etag }
	switch in.op {
	case opPart1, opPart2, opList:
		switch {
		case out.status == 200 && active:
			if in.op == opPart2 {
				st.part2 = true
			}
			return []raceState{st}
		case out.code == "NoSuchUpload":
			return ok(!active, st)
		}
	case opComplete:
		switch {
		case out.status == 200 && active && st.part2:
			return []raceState{{phase: "completed", part2: true, etag: out.etag}}
		case out.status == 200 && st.phase == "completed":
			// A retried complete with the same parts gets the recorded answer.
			return ok(sameETag(out.etag), raceState{phase: "completed", part2: true, etag: out.etag})
		case out.code == "InvalidPart":
			return ok(active && !st.part2, st)
		case out.code == "NoSuchUpload":
			return ok(st.phase == "aborted", st)
		}
	case opAbort:
		switch {
		case out.status == 204 && st.phase != "completed":
			return []raceState{{phase: "aborted", part2: st.part2}}
		case out.code == "NoSuchUpload":
			return ok(st.phase == "completed", st)
		}
	case opObserve:
		return ok(out.phase == st.phase && (st.phase != "completed" || sameETag(out.etag)), st)
	}
	return nil
}

var raceModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			u := op.Input.(raceInput).upload
			by[u] = append(by[u], op)
		}
		var out [][]porcupine.Operation
		for _, u := range slices.Sorted(maps.Keys(by)) {
			out = append(out, by[u])
		}
		return out
	},
	Init: func() []any { return []any{raceState{phase: "active"}} },
	Step: func(state, input, output any) []any {
		var out []any
		for _, s := range raceStep(state.(raceState), input.(raceInput), output.(raceOutput)) {
			out = append(out, s)
		}
		return out
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%s -> %s", input.(raceInput).op, output.(raceOutput))
	},
	DescribeState: func(state any) string {
		s := state.(raceState)
		return fmt.Sprintf("%s part2=%v %s", s.phase, s.part2, s.etag)
	},
}

// md5Hex returns the hex MD5 of b: the ETag S3 gives a part of those bytes.
func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// callOutput turns an aws-sdk-go-v2 call's error into a raceOutput.
func callOutput(err error, okStatus int, etag string) raceOutput {
	if err == nil {
		return raceOutput{status: okStatus, etag: unquoteETag(etag)}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() > 0 {
		return raceOutput{status: re.HTTPStatusCode(), code: apiErrorCode(err)}
	}
	return raceOutput{status: -1, code: "no answer"}
}

// TestSessionsRace issues completes, aborts, part uploads and part listings
// on the same few uploads from many goroutines at once, and checks that
// every answer and every upload's final state (in etcd and on MinIO) is
// explained by some sequential order of the calls (a linearizability check
// with porcupine), and that no completed object is missing bytes.
func TestSessionsRace(t *testing.T) {
	e := harness.Start(t)
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	bucket := e.Bucket(t)

	const (
		rounds     = 6
		uploads    = 4 // per round
		goroutines = 6 // per upload
		opsEach    = 2 // per goroutine
	)
	seed := raceSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	// Each round draws its calls from one mix: completes racing the part
	// they need, everything at once, and completes racing aborts.
	mixes := [][]string{
		{opPart1, opPart2, opPart2, opList, opComplete, opComplete, opComplete},
		{opPart1, opPart2, opPart2, opPart2, opList, opComplete, opComplete, opComplete, opAbort, opAbort},
		{opPart2, opComplete, opComplete, opAbort},
	}

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		all     []*raceUpload
	)
	begin := time.Now()
	now := func() int64 { return time.Since(begin).Nanoseconds() }
	record := func(client int, in raceInput, call int64, out raceOutput) {
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: now()})
	}

	for round := range rounds {
		// Set up the round's uploads: each starts with part 1 uploaded.
		var ups []*raceUpload
		for i := range uploads {
			u := newRaceUpload(t, c, bucket, round*uploads+i)
			ups = append(ups, u)
			all = append(all, u)
		}
		// The calls, chosen before any goroutine starts.
		plans := make([][]string, uploads*goroutines)
		ops := mixes[round%len(mixes)]
		for g := range plans {
			for range opsEach {
				plans[g] = append(plans[g], ops[rng.IntN(len(ops))])
			}
		}
		startGate := make(chan struct{})
		var wg sync.WaitGroup
		for g, plan := range plans {
			u := ups[g%uploads]
			n := round*uploads + g%uploads
			client := round*len(plans) + g
			wg.Go(func() {
				<-startGate
				for _, op := range plan {
					in := raceInput{upload: n, op: op}
					call := now()
					out := raceCall(t, c, bucket, u, op)
					record(client, in, call, out)
				}
			})
		}
		close(startGate)
		wg.Wait()
	}

	// Observe each upload's final state, in etcd and on MinIO, after every
	// call returned; the two must agree.
	for n, u := range all {
		call := now()
		rec := store.session(t, bucket, u.id)
		out := raceOutput{phase: rec.State}
		if rec.Completion != nil {
			out.etag = unquoteETag(rec.Completion.ETag)
		}
		if msg := backendAgrees(t, direct, bucket, u.key, u.id, rec, u.part1, u.part2); msg != "" {
			t.Errorf("upload %d (%s): %s; history %s", n, u.key, msg, rec.path())
			out.phase = "inconsistent: " + msg
		}
		record(len(all)*goroutines*opsEach+n, raceInput{upload: n, op: opObserve}, call, out)
	}

	requireLinearizable(t, history, len(all))
}

// raceUpload is one upload of TestSessionsRace: part 1 uploaded, part 2's
// bytes, and the part list every complete of it sends.
type raceUpload struct {
	key, id    string
	part1      harness.Data
	part2      harness.Data
	completion []s3types.CompletedPart
}

// raceSeed returns the seed of TestSessionsRace's choice of calls:
// SWEEPGATE_E2E_RACE_SEED, or the clock.
func raceSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SWEEPGATE_E2E_RACE_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (SWEEPGATE_E2E_RACE_SEED=%d repeats this run's choice of calls; SWEEPGATE_E2E_RACE_HTML=FILE writes porcupine's view of a failure)", seed, seed)
	return seed
}

// newRaceUpload creates upload n of TestSessionsRace with part 1 uploaded.
func newRaceUpload(t *testing.T, c *s3.Client, bucket string, n int) *raceUpload {
	u := &raceUpload{
		key:   fmt.Sprintf("race/%d", n),
		part1: harness.NewData(uint64(6000+n), 5*mib),
		part2: harness.NewData(uint64(7000+n), kib+int64(n)),
	}
	u.id = createUpload(t, c, bucket, u.key)
	p1 := mustUploadPart(t, c, bucket, u.key, u.id, 1, u.part1.Section(0, u.part1.Size))
	// Part 2's ETag is known before it is uploaded: the MD5 of its
	// bytes, as every upload of it sends the same bytes.
	u.completion = []s3types.CompletedPart{
		{PartNumber: aws.Int32(1), ETag: p1.ETag},
		{PartNumber: aws.Int32(2), ETag: aws.String(`"` + md5Hex(u.part2.Bytes()) + `"`)},
	}
	return u
}

// raceCall makes the call op on u and returns what it answered, as the
// race model sees it.
func raceCall(t *testing.T, c *s3.Client, bucket string, u *raceUpload, op string) raceOutput {
	var out raceOutput
	switch op {
	case opPart1, opPart2:
		d, pn := u.part1, int32(1)
		if op == opPart2 {
			d, pn = u.part2, 2
		}
		res, err := uploadPart(t.Context(), c, bucket, u.key, u.id, pn, d.Section(0, d.Size))
		etag := ""
		if err == nil {
			etag = aws.ToString(res.ETag)
		}
		out = callOutput(err, 200, etag)
		out.etag = "" // a part's ETag is fixed by its bytes
	case opList:
		_, err := c.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(u.key), UploadId: aws.String(u.id)})
		out = callOutput(err, 200, "")
	case opComplete:
		res, err := completeUpload(t.Context(), c, bucket, u.key, u.id, u.completion)
		etag := ""
		if err == nil {
			etag = aws.ToString(res.ETag)
		}
		out = callOutput(err, 200, etag)
	case opAbort:
		out = callOutput(abortUpload(t.Context(), c, bucket, u.key, u.id), 204, "")
	}
	return out
}

// requireLinearizable checks that some sequential order of the calls in
// history explains what they answered and where the uploads (observed at
// the end, one operation each) ended.
func requireLinearizable(t *testing.T, history []porcupine.Operation, uploads int) {
	res, info := porcupine.CheckOperationsVerbose(raceModel.ToModel(), history, 20*time.Second)
	switch res {
	case porcupine.Ok:
		t.Logf("%d calls on %d uploads: linearizable; final states %s", len(history)-uploads, uploads, finalStates(history))
	case porcupine.Unknown:
		t.Fatalf("the linearizability check timed out on %d calls", len(history))
	default:
		if path := os.Getenv("SWEEPGATE_E2E_RACE_HTML"); path != "" {
			if err := porcupine.VisualizePath(raceModel.ToModel(), info, path); err != nil {
				t.Logf("visualize: %v", err)
			}
		}
		t.Fatalf("no sequential order of the calls explains what they answered and where the uploads ended:\n%s", describeHistories(history))
	}
}

// backendAgrees checks MinIO against a session's final state and returns
// what disagrees, or "".
func backendAgrees(t *testing.T, direct *s3.Client, bucket, key, id string, rec sessionRecord, p1, p2 harness.Data) string {
	t.Helper()
	_, listErr := direct.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(id)})
	uploadThere := listErr == nil
	if listErr != nil && apiErrorCode(listErr) != "NoSuchUpload" {
		t.Fatalf("ListParts on MinIO: %v", listErr)
	}
	obj, getErr := direct.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	objectThere := getErr == nil
	if getErr != nil && apiErrorCode(getErr) != "NoSuchKey" {
		t.Fatalf("GetObject on MinIO: %v", getErr)
	}
	switch rec.State {
	case "active":
		if !uploadThere || objectThere {
			return fmt.Sprintf("session active, but on MinIO upload present=%v object present=%v", uploadThere, objectThere)
		}
	case "aborted":
		if uploadThere || objectThere {
			return fmt.Sprintf("session aborted, but on MinIO upload present=%v object present=%v", uploadThere, objectThere)
		}
	case "completed":
		if uploadThere || !objectThere {
			return fmt.Sprintf("session completed, but on MinIO upload present=%v object present=%v", uploadThere, objectThere)
		}
	default:
		return fmt.Sprintf("session left %s after every call returned", rec.State)
	}
	if objectThere {
		defer obj.Body.Close()
		sum, n, err := harness.HashReader(obj.Body)
		if err != nil {
			t.Fatal(err)
		}
		want, size := concatSum(t, p1.Reader(), p2.Reader())
		if sum != want || n != size {
			return fmt.Sprintf("the object holds %d bytes sha256 %s, want %d bytes %s (parts 1 and 2)", n, sum, size, want)
		}
		if rec.Completion == nil || unquoteETag(aws.ToString(obj.ETag)) != unquoteETag(rec.Completion.ETag) {
			return fmt.Sprintf("the object's ETag %s is not the recorded one %+v", aws.ToString(obj.ETag), rec.Completion)
		}
	}
	return ""
}

// finalStates counts the observed final states.
func finalStates(h []porcupine.Operation) string {
	count := map[string]int{}
	for _, op := range h {
		if op.Input.(raceInput).op == opObserve {
			count[op.Output.(raceOutput).phase]++
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		out = append(out, fmt.Sprintf("%s=%d", k, count[k]))
	}
	return strings.Join(out, " ")
}

// describeHistories renders each upload's calls in the order they began.
func describeHistories(h []porcupine.Operation) string {
	by := map[int][]porcupine.Operation{}
	for _, op := range h {
		u := op.Input.(raceInput).upload
		by[u] = append(by[u], op)
	}
	var b strings.Builder
	for _, u := range slices.Sorted(maps.Keys(by)) {
		ops := by[u]
		slices.SortFunc(ops, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
		fmt.Fprintf(&b, "upload %d:\n", u)
		for _, op := range ops {
			fmt.Fprintf(&b, "  [%8.3fms %8.3fms] client %3d %-14s -> %s\n", float64(op.Call)/1e6, float64(op.Return)/1e6, op.ClientId, op.Input.(raceInput).op, op.Output.(raceOutput))
		}
	}
	return b.String()
}

// TestRaceModel checks the race test's model on small hand-made histories,
// so that a passing race test means something.
func TestRaceModel(t *testing.T) {
	op := func(client int, call, ret int64, o string, out raceOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: raceInput{op: o}, Call: call, Output: out, Return: ret}
	}
	ok200 := raceOutput{status: 200}
	done := raceOutput{status: 200, etag: "e-2"}
	tests := []struct {
		name string
		h    []porcupine.Operation
		want bool
	}{
		{"part, complete, complete again", []porcupine.Operation{
			op(0, 0, 1, opPart2, ok200), op(0, 2, 3, opComplete, done), op(1, 4, 5, opComplete, done),
			op(2, 6, 7, opObserve, raceOutput{phase: "completed", etag: "e-2"}),
		}, true},
		{"complete before its part refused, concurrent abort loses", []porcupine.Operation{
			op(0, 0, 1, opComplete, raceOutput{status: 400, code: "InvalidPart"}),
			op(1, 2, 6, opPart2, ok200), op(2, 3, 8, opComplete, done), op(3, 4, 7, opAbort, raceOutput{status: 409, code: "OperationAborted"}),
			op(4, 9, 10, opObserve, raceOutput{phase: "completed", etag: "e-2"}),
		}, true},
		{"abort and complete both succeed", []porcupine.Operation{
			op(0, 0, 1, opPart2, ok200), op(1, 2, 5, opComplete, done), op(2, 3, 4, opAbort, raceOutput{status: 204}),
			op(3, 6, 7, opObserve, raceOutput{phase: "completed", etag: "e-2"}),
		}, false},
		{"complete answered 200 but the upload ended active", []porcupine.Operation{
			op(0, 0, 1, opPart2, ok200), op(1, 2, 3, opComplete, done), op(2, 4, 5, opObserve, raceOutput{phase: "active"}),
		}, false},
		{"two completes with different ETags", []porcupine.Operation{
			op(0, 0, 1, opPart2, ok200), op(1, 2, 3, opComplete, done), op(1, 4, 5, opComplete, raceOutput{status: 200, etag: "other-2"}),
		}, false},
		{"part accepted after the abort returned", []porcupine.Operation{
			op(0, 0, 1, opAbort, raceOutput{status: 204}), op(1, 2, 3, opPart2, ok200),
		}, false},
		{"lost part answer may or may not count", []porcupine.Operation{
			op(0, 0, 1, opPart2, raceOutput{status: -1}), op(1, 2, 3, opComplete, done),
			op(2, 4, 5, opObserve, raceOutput{phase: "completed", etag: "e-2"}),
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(raceModel.ToModel(), tc.h); got != tc.want {
				t.Fatalf("linearizable = %v, want %v", got, tc.want)
			}
		})
	}
}
