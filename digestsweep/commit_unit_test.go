package digestsweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// How commit groups the sweep's writes into etcd transactions, over a
// clientv3.KV that records each transaction instead of sending it.

// etcdMaxTxnOps is etcd's default limit: a transaction with more
// comparisons, or more operations on either branch, is refused whole.
const etcdMaxTxnOps = int(embed.DefaultMaxTxnOps)

// sizedWrite is a write of nc comparisons and no operations on keys of its
// own under name.
func sizedWrite(name string, nc, no int) digestWrite {
	var w digestWrite
	for j := range nc {
		w.cmps = append(w.cmps, clientv3.Compare(clientv3.Version(fmt.Sprintf("/unit/w/%s/c%d", name, j)), "=", 1))
	}
	for j := range no {
		w.ops = append(w.ops, clientv3.OpPut(fmt.Sprintf("/unit/w/%s/o%d", name, j), "v"))
	}
	return w
}

// writesOfSizes returns writes of the given comparison and operation counts
// (empty ones: txnEnd only counts them).
func writesOfSizes(counts ...[2]int) []digestWrite {
	writes := make([]digestWrite, len(counts))
	for i, c := range counts {
		writes[i] = digestWrite{cmps: make([]clientv3.Cmp, c[0]), ops: make([]clientv3.Op, c[1])}
	}
	return writes
}

func repeatSize(n, nc, no int) [][2]int {
	out := make([][2]int, n)
	for i := range out {
		out[i] = [2]int{nc, no}
	}
	return out
}

// txnGroups returns the transactions txnEnd cuts writes into, as lengths.
func txnGroups(writes []digestWrite) []int {
	var out []int
	for start := 0; start < len(writes); {
		end := txnEnd(writes, start)
		if end <= start || end > len(writes) {
			panic(fmt.Sprintf("txnEnd(%d) = %d of %d writes", start, end, len(writes)))
		}
		out = append(out, end-start)
		start = end
	}
	return out
}

// TestTxnEndBound: a transaction takes writes in order while their
// comparisons and their operations, each counted on its own, stay within
// sweepTxnOps, and as many as do; a write over the bound on its own goes
// in a transaction of its own. The bound leaves etcd's limit room for the
// fence's comparison and the cursor's put.
func TestTxnEndBound(t *testing.T) {
	if sweepTxnOps+1 > etcdMaxTxnOps {
		t.Fatalf("sweepTxnOps = %d: with the fence and the cursor over etcd's limit of %d", sweepTxnOps, etcdMaxTxnOps)
	}
	for _, tt := range []struct {
		name   string
		counts [][2]int
		want   []int
	}{
		{"one write", repeatSize(1, 1, 1), []int{1}},
		{"exactly the bound", repeatSize(sweepTxnOps, 1, 1), []int{sweepTxnOps}},
		{"one over", repeatSize(sweepTxnOps+1, 1, 1), []int{sweepTxnOps, 1}},
		{"operations fill it", [][2]int{{0, 60}, {0, 60}, {0, 1}}, []int{2, 1}},
		{"operations one over", [][2]int{{0, 60}, {0, 61}}, []int{1, 1}},
		{"comparisons one over", [][2]int{{100, 1}, {21, 1}, {1, 1}}, []int{1, 2}},
		{"counted apart, not summed", [][2]int{{60, 60}, {60, 60}}, []int{2}},
		{"a write over the bound goes alone", [][2]int{{1, 1}, {0, sweepTxnOps + 5}, {1, 1}}, []int{1, 1, 1}},
		{"a lone oversized first write", [][2]int{{sweepTxnOps + 1, 0}, {1, 1}, {1, 1}}, []int{1, 2}},
		{"empty writes", repeatSize(300, 0, 0), []int{300}},
	} {
		if got := txnGroups(writesOfSizes(tt.counts...)); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: transactions of %v writes, want %v", tt.name, got, tt.want)
		}
	}
}

// TestTxnEndRandom: over random writes, every transaction of more than
// one write is within sweepTxnOps comparisons and operations, and could
// not have taken the next write.
func TestTxnEndRandom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		most := []int{3, 20, 70, sweepTxnOps + 8}[round%4]
		counts := make([][2]int, 1+rnd.IntN(60))
		for i := range counts {
			counts[i] = [2]int{rnd.IntN(most + 1), rnd.IntN(most + 1)}
		}
		writes := writesOfSizes(counts...)
		start := 0
		for _, n := range txnGroups(writes) {
			nc, no := 0, 0
			for _, w := range writes[start : start+n] {
				nc, no = nc+len(w.cmps), no+len(w.ops)
			}
			if n > 1 && (nc > sweepTxnOps || no > sweepTxnOps) {
				t.Fatalf("round %d: transaction of writes %d..%d has %d comparisons and %d operations, over %d",
					round, start, start+n, nc, no, sweepTxnOps)
			}
			if end := start + n; end < len(writes) && nc+len(writes[end].cmps) <= sweepTxnOps && no+len(writes[end].ops) <= sweepTxnOps {
				t.Fatalf("round %d: transaction of writes %d..%d left out write %d, which fits", round, start, end, end)
			}
			start += n
		}
	}
}

// txnRecorder is a clientv3.KV that records each transaction and answers
// it as etcd would: refused when it is over etcd's limit, failed when the
// term has ended or a comparison names a key in stale, committed at the
// next revision otherwise. Any other call panics on the nil KV.
type txnRecorder struct {
	clientv3.KV
	term sweep.Term

	mu    sync.Mutex
	ended bool
	stale map[string]bool
	rev   int64
	txns  []recordedTxn
}

type recordedTxn struct {
	cmps       []clientv3.Cmp
	then, els  []clientv3.Op
	ok         bool
	rev        int64
	overLimits bool
}

type recordingTxn struct {
	kv *txnRecorder
	r  recordedTxn
}

func (kv *txnRecorder) Txn(context.Context) clientv3.Txn { return &recordingTxn{kv: kv} }

func (t *recordingTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.r.cmps = append(t.r.cmps, cs...)
	return t
}

func (t *recordingTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.r.then = append(t.r.then, ops...)
	return t
}

func (t *recordingTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.r.els = append(t.r.els, ops...)
	return t
}

func (t *recordingTxn) Commit() (*clientv3.TxnResponse, error) {
	kv := t.kv
	kv.mu.Lock()
	defer kv.mu.Unlock()
	// etcd's own check (checkTxnRequest): the largest of the three.
	if max(len(t.r.cmps), len(t.r.then), len(t.r.els)) > etcdMaxTxnOps {
		t.r.overLimits = true
		kv.txns = append(kv.txns, t.r)
		return nil, errors.New("fake etcd: too many operations in txn request")
	}
	kv.rev++
	t.r.rev, t.r.ok = kv.rev, !kv.ended
	for _, c := range t.r.cmps {
		t.r.ok = t.r.ok && !kv.stale[string(c.KeyBytes())]
	}
	kv.txns = append(kv.txns, t.r)
	resp := &clientv3.TxnResponse{Header: &pb.ResponseHeader{Revision: kv.rev}, Succeeded: t.r.ok}
	if !t.r.ok {
		n := kv.term.N
		if kv.ended {
			n++
		}
		leader := &mvccpb.KeyValue{Key: []byte(kv.term.Key), CreateRevision: n}
		resp.Responses = []*pb.ResponseOp{{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{Kvs: []*mvccpb.KeyValue{leader}}}}}
	}
	return resp, nil
}

// newRecordedSweep returns a test sweep whose etcd is rec.
func newRecordedSweep(t *testing.T) (*digestSweep, *txnRecorder) {
	s := newTestSweep(t, newFakeBackend(), nil)
	s.term.Key = "/unit/leader"
	rec := &txnRecorder{term: s.term, stale: map[string]bool{}}
	s.store = etcdstore.NewStore(&clientv3.Client{KV: rec}, s.keys())
	return s, rec
}

// randomWrites returns n writes of random sizes up to most, a third of
// them carrying counts (one deleted blob of i bytes), with the
// comparisons of those for which stale is true marked stale on rec.
func randomWrites(rnd *rand.Rand, rec *txnRecorder, n, most int, stale func(i int) bool) []digestWrite {
	writes := make([]digestWrite, n)
	for i := range writes {
		writes[i] = sizedWrite(fmt.Sprint(i), 1+rnd.IntN(most), 1+rnd.IntN(most))
		if rnd.IntN(3) == 0 {
			writes[i].delta = &Report{Deleted: 1, Bytes: int64(i)}
		}
		if stale(i) {
			rec.stale[string(writes[i].cmps[0].KeyBytes())] = true
		}
	}
	return writes
}

// writeOf returns the index of the write an operation's key belongs to,
// or -1 for the cursor's put.
func writeOf(op clientv3.Op) int {
	var i int
	if _, err := fmt.Sscanf(strings.TrimPrefix(string(op.KeyBytes()), "/unit/w/"), "%d/", &i); err != nil {
		return -1
	}
	return i
}

// checkLanded checks rec's transactions against what commit returned:
// none over etcd's limit, each write landed exactly when its own
// comparisons held, whatever it shared a transaction with, all its
// operations in the one committed transaction at revs[i], and none of a
// write that did not land committed. It returns the committed
// transactions' write indexes, in the order they were committed.
func checkLanded(t *testing.T, rec *txnRecorder, writes []digestWrite, stale func(int) bool, landed []bool, revs []int64) [][]int {
	t.Helper()
	committed := make([]int64, len(writes))
	var order [][]int
	for _, txn := range rec.txns {
		if txn.overLimits {
			t.Errorf("transaction of %d comparisons, %d and %d operations: over etcd's limit of %d",
				len(txn.cmps), len(txn.then), len(txn.els), etcdMaxTxnOps)
		}
		if !txn.ok {
			continue
		}
		var in []int
		for _, op := range txn.then {
			if i := writeOf(op); i >= 0 {
				if committed[i] != 0 && committed[i] != txn.rev {
					t.Errorf("write %d committed at revisions %d and %d", i, committed[i], txn.rev)
				}
				committed[i] = txn.rev
				if len(in) == 0 || in[len(in)-1] != i {
					in = append(in, i)
				}
			}
		}
		order = append(order, in)
	}
	for i := range writes {
		if landed[i] == stale(i) {
			t.Errorf("write %d (stale %v): landed = %v", i, stale(i), landed[i])
		}
		if landed[i] && (revs[i] == 0 || revs[i] != committed[i]) {
			t.Errorf("write %d landed at revision %d, committed at %d", i, revs[i], committed[i])
		}
		if !landed[i] && committed[i] != 0 {
			t.Errorf("write %d not landed, committed at %d", i, committed[i])
		}
	}
	return order
}

// TestCommitTransactions: commit's transactions are within etcd's limit
// with the fence and the cursor, committed in order; a transaction with
// one stale write is tried again write by write, so only that write is
// lost; and each transaction with counts records the cursor with every
// count landed so far, its own included, so the report counts each landed
// write exactly once.
func TestCommitTransactions(t *testing.T) {
	for _, most := range []int{3, 30, 60, sweepTxnOps} {
		s, rec := newRecordedSweep(t)
		rnd := rand.New(rand.NewPCG(uint64(most), 3))
		stale := func(i int) bool { return i%17 == 5 }
		writes := randomWrites(rnd, rec, 300, most, stale)
		landed, revs, err := s.commit(t.Context(), writes)
		if err != nil {
			t.Fatalf("writes of up to %d: commit: %v", most, err)
		}
		order := checkLanded(t, rec, writes, stale, landed, revs)
		if len(order) == len(rec.txns) {
			t.Errorf("writes of up to %d: no transaction failed, the retry write by write was not tried", most)
		}
		last := -1
		for _, in := range order {
			if in[0] <= last {
				t.Errorf("writes of up to %d: write %d committed after write %d", most, in[0], last)
			}
			last = in[len(in)-1]
		}
		var want Report
		for i, w := range writes {
			if landed[i] && w.delta != nil {
				want.plus(*w.delta)
			}
		}
		if s.cur.Report.Deleted != want.Deleted || s.cur.Report.Bytes != want.Bytes {
			t.Errorf("writes of up to %d: report counts %d deleted of %d bytes, want %d of %d",
				most, s.cur.Report.Deleted, s.cur.Report.Bytes, want.Deleted, want.Bytes)
		}
		checkCursorCounts(t, rec, writes)
	}
}

// checkCursorCounts checks that each committed transaction holding a
// write with counts also puts the cursor, with the counts of every write
// committed up to it, and that no other transaction puts it.
func checkCursorCounts(t *testing.T, rec *txnRecorder, writes []digestWrite) {
	t.Helper()
	var sum Report
	for _, txn := range rec.txns {
		if !txn.ok {
			continue
		}
		var cursors []clientv3.Op
		counts, seen := false, map[int]bool{}
		for _, op := range txn.then {
			if i := writeOf(op); i < 0 {
				cursors = append(cursors, op)
			} else if writes[i].delta != nil && !seen[i] {
				seen[i] = true
				sum.plus(*writes[i].delta)
				counts = true
			}
		}
		if !counts {
			if len(cursors) != 0 {
				t.Errorf("transaction at %d without counts puts the cursor", txn.rev)
			}
			continue
		}
		if len(cursors) != 1 {
			t.Errorf("transaction at %d with counts puts the cursor %d times, want once", txn.rev, len(cursors))
			continue
		}
		var c digestCursor
		if err := json.Unmarshal(cursors[0].ValueBytes(), &c); err != nil {
			t.Fatal(err)
		}
		if c.Report.Deleted != sum.Deleted || c.Report.Bytes != sum.Bytes {
			t.Errorf("cursor put at %d counts %d deleted of %d bytes, want %d of %d",
				txn.rev, c.Report.Deleted, c.Report.Bytes, sum.Deleted, sum.Bytes)
		}
	}
}

// TestCommitParallelTransactions: commitParallel's transactions are
// within etcd's limit, and each write lands exactly when its own
// comparisons hold.
func TestCommitParallelTransactions(t *testing.T) {
	for _, most := range []int{3, 30, sweepTxnOps} {
		s, rec := newRecordedSweep(t)
		rnd := rand.New(rand.NewPCG(uint64(most), 4))
		stale := func(i int) bool { return i%13 == 2 }
		writes := randomWrites(rnd, rec, 300, most, stale)
		for i := range writes {
			writes[i].delta = nil
		}
		landed, revs, err := s.commitParallel(t.Context(), writes)
		if err != nil {
			t.Fatalf("writes of up to %d: commitParallel: %v", most, err)
		}
		checkLanded(t, rec, writes, stale, landed, revs)
	}
}

// TestCommitFenced: once the term is over, commit stops at its first
// transaction, which writes nothing, and returns ErrFenced.
func TestCommitFenced(t *testing.T) {
	s, rec := newRecordedSweep(t)
	rec.ended = true
	writes := randomWrites(rand.New(rand.NewPCG(5, 5)), rec, 300, 10, func(int) bool { return false })
	landed, _, err := s.commit(t.Context(), writes)
	if !errors.Is(err, sweep.ErrFenced) {
		t.Fatalf("commit = %v, want ErrFenced", err)
	}
	for i, l := range landed {
		if l {
			t.Errorf("write %d landed after the term ended", i)
		}
	}
	if len(rec.txns) != 1 {
		t.Errorf("%d transactions tried after the term ended, want 1", len(rec.txns))
	}
}

// TestCommitDryRun: a dry run sends nothing to etcd, reports every write
// landed, and counts every write's counts once.
func TestCommitDryRun(t *testing.T) {
	s, rec := newRecordedSweep(t)
	s.dry = true
	writes := randomWrites(rand.New(rand.NewPCG(6, 6)), rec, 300, 30, func(int) bool { return false })
	var want Report
	for _, w := range writes {
		if w.delta != nil {
			want.plus(*w.delta)
		}
	}
	for name, commit := range map[string]func(context.Context, []digestWrite) ([]bool, []int64, error){
		"commit": s.commit, "commitParallel": s.commitParallel,
	} {
		s.cur.Report = Report{}
		landed, _, err := commit(t.Context(), writes)
		if err != nil {
			t.Fatalf("dry %s: %v", name, err)
		}
		for i, l := range landed {
			if !l {
				t.Errorf("dry %s: write %d not reported landed", name, i)
			}
		}
		if s.cur.Report.Deleted != want.Deleted || s.cur.Report.Bytes != want.Bytes {
			t.Errorf("dry %s: report counts %d deleted of %d bytes, want %d of %d",
				name, s.cur.Report.Deleted, s.cur.Report.Bytes, want.Deleted, want.Bytes)
		}
	}
	if len(rec.txns) != 0 {
		t.Errorf("a dry run sent %d transactions", len(rec.txns))
	}
}
