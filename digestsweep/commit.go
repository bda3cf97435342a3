package digestsweep

import (
	"context"
	"errors"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/sweep"
)

// digestWrite is one digest's part of a transaction: what it compares and
// what it writes, and what it adds to the report once it lands (recorded
// in the cursor by the same transaction, so a resumed pass counts it
// exactly once).
type digestWrite struct {
	cmps  []clientv3.Cmp
	ops   []clientv3.Op
	delta *Report
}

// sweepTxnOps bounds the comparisons and the writes of one transaction, inside
// etcd's default limit of 128 with room for the fence and the cursor.
const sweepTxnOps = 120

// commit commits writes, fenced by the term, several to a transaction. A
// transaction whose comparisons fail is tried again one write at a time,
// so that one digest whose records moved does not hold back the others.
// landed[i] says whether writes[i] was committed and revs[i] at which
// revision. A dry run commits nothing and reports every write landed.
// The transactions are committed one after another, in order.
func (s *digestSweep) commit(ctx context.Context, writes []digestWrite) (landed []bool, revs []int64, err error) {
	landed, revs = make([]bool, len(writes)), make([]int64, len(writes))
	for start := 0; start < len(writes); {
		end := txnEnd(writes, start)
		if err := s.commitGroup(ctx, writes, start, end, landed, revs); err != nil {
			return landed, revs, err
		}
		start = end
	}
	return landed, revs, nil
}

// commitParallel is commit with up to commitsInFlight transactions in
// flight at once, in no particular order. It is for writes that are
// independent of one another (each to records of its own digest, none
// carrying counts), such as arming a page's guards: etcd takes
// transactions in flight together into one round of its log, so a page's
// writes cost about one round a commitsInFlight transactions. On an
// error, the transactions already in flight finish; landed says which
// writes were committed.
func (s *digestSweep) commitParallel(ctx context.Context, writes []digestWrite) (landed []bool, revs []int64, err error) {
	landed, revs = make([]bool, len(writes)), make([]int64, len(writes))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		slots = make(chan struct{}, commitsInFlight)
	)
	for start := 0; start < len(writes); {
		end := txnEnd(writes, start)
		slots <- struct{}{}
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			<-slots
			break
		}
		from := start
		wg.Go(func() {
			defer func() { <-slots }()
			// Each group writes its own elements of landed and revs.
			if err := s.commitGroup(ctx, writes, from, end, landed, revs); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
		start = end
	}
	wg.Wait()
	return landed, revs, first
}

// commitsInFlight is how many transactions commitParallel has in flight.
const commitsInFlight = 4

// txnEnd returns the end of the transaction that starts at writes[start]:
// as many writes as fit within sweepTxnOps comparisons and operations.
func txnEnd(writes []digestWrite, start int) int {
	end, nc, no := start+1, len(writes[start].cmps), len(writes[start].ops)
	for end < len(writes) && nc+len(writes[end].cmps) <= sweepTxnOps && no+len(writes[end].ops) <= sweepTxnOps {
		nc, no = nc+len(writes[end].cmps), no+len(writes[end].ops)
		end++
	}
	return end
}

// commitGroup commits writes[start:end] in one transaction, or one write
// at a time when its comparisons fail, and records in landed and revs
// what was committed.
func (s *digestSweep) commitGroup(ctx context.Context, writes []digestWrite, start, end int, landed []bool, revs []int64) error {
	rev, err := s.commitOne(ctx, writes[start:end])
	switch {
	case err == nil:
		for i := start; i < end; i++ {
			landed[i], revs[i] = true, rev
		}
	case errors.Is(err, sweep.ErrChanged) && end-start > 1:
		for i := start; i < end; i++ {
			rev, err := s.commitOne(ctx, writes[i:i+1])
			if err != nil && !errors.Is(err, sweep.ErrChanged) {
				return err
			}
			landed[i], revs[i] = err == nil, rev
		}
	case errors.Is(err, sweep.ErrChanged):
	default:
		return err
	}
	return nil
}

// commitOne commits writes in one fenced transaction, with the cursor when
// they carry counts, and returns its revision.
func (s *digestSweep) commitOne(ctx context.Context, writes []digestWrite) (int64, error) {
	var (
		cmps  []clientv3.Cmp
		ops   []clientv3.Op
		sum   Report
		count bool
	)
	for _, w := range writes {
		cmps = append(cmps, w.cmps...)
		ops = append(ops, w.ops...)
		if w.delta != nil {
			sum.plus(*w.delta)
			count = true
		}
	}
	if !count && !s.dry {
		resp, err := sweep.FencedTxn(ctx, s.cli(), s.term, cmps, ops...)
		if err != nil {
			return 0, err
		}
		return resp.Header.Revision, nil
	}
	// Transactions that record counts go one at a time, so that the
	// cursor each records holds every count recorded before it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dry {
		s.cur.Report.plus(sum)
		return 0, nil
	}
	next := s.cur
	next.Report.plus(sum)
	ops = append(ops, cursorOpOf(s.keys(), &next))
	resp, err := sweep.FencedTxn(ctx, s.cli(), s.term, cmps, ops...)
	if err != nil {
		return 0, err
	}
	s.cur.Report.plus(sum)
	return resp.Header.Revision, nil
}

// countChanged counts a blob whose records moved under the collector.
func (s *digestSweep) countChanged() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.Report.Changed++
}
