// Package migrate moves the state sweepgate keeps in etcd from one
// keyspace schema to the next (see docs/upgrading.md, "Migrations").
//
// A migration is a sequence of registered steps, one per schema (Step).
// Each step begins with one transaction that records the new schema under
// the key prefix (etcdstore.Keys.Schema) together with the migration
// record (Keys.Migration): from then on every gateway that reads the new
// schema writes its form, and a gateway that does not reads the schema
// record and refuses every request that would write state. The step then
// rewrites the records of the old form in key order, in batches, each
// batch one transaction that also advances the migration record, so that
// a migration stopped anywhere goes on from where it stopped. When the
// first scan reaches the end it waits (Migrator.Settle) for every gateway
// to have read the new schema and scans once more, for records a gateway
// wrote in the old form just before; then the step is done.
//
// Every write compares the reclaimer's term (sweep.FencedTxn): a migration
// runs on the elected reclaimer, between passes, and a leader that lost
// its term writes nothing more. Every record write compares the revision
// the record was read at, so a record a gateway changed meanwhile is read
// again, never overwritten with what it held before. Running a migration
// that is done does nothing but a final scan, so it is idempotent.
//
// A step starts only while every live gateway reads the new schema (its
// published schemas, etcdstore.GatewayClock.Reads), unless forced: a
// forced migration leaves the older gateways serving plain object calls
// and refusing the rest, never misreading the new form.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// DefaultSettle is how long a step waits after its first scan before the
// final one: several times the interval at which gateways read the stored
// schema (one second), plus the time a write of theirs may take.
const DefaultSettle = 5 * time.Second

// batchSize is how many keys one transaction of a scan covers; it stays
// below etcd's default limit of operations per transaction (128).
const batchSize = 64

// changedRetries bounds how often a batch is read again because a record
// in it changed between the read and the write.
const changedRetries = 16

// Migrator runs and plans migrations of one keyspace.
type Migrator struct {
	Store *etcdstore.Store
	// Now is the wall clock, for the migration record.
	Now func() time.Time
	// Sleep waits d or until ctx ends; nil waits on a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Settle is the wait before a step's final scan; 0 is DefaultSettle.
	Settle time.Duration
	Log    *slog.Logger
}

// ErrBlocked says a live gateway does not read the schema a step moves
// to; *BlockedError wraps it.
var ErrBlocked = errors.New("migrate: a live gateway does not read the new schema")

// BlockedError names the gateways that do not read the schema To.
type BlockedError struct {
	To       int
	Gateways []Gateway
}

func (e *BlockedError) Error() string {
	msg := fmt.Sprintf("migrate: %d live gateway(s) do not read schema %d:", len(e.Gateways), e.To)
	for _, g := range e.Gateways {
		msg += fmt.Sprintf(" %s (sweepgate %s, reads schemas %d to %d);", g.ID, g.Release, g.Min, g.Max)
	}
	return msg + " upgrade them first, or force the migration and they refuse every request that writes state"
}

// Unwrap makes errors.Is(err, ErrBlocked) hold.
func (e *BlockedError) Unwrap() error { return ErrBlocked }

// Gateway is a live gateway and the schemas it reads.
type Gateway struct {
	ID       string `json:"id"`
	Release  string `json:"release"`
	Min, Max int
}

// StepResult is what one step did, or (in a plan) would do.
type StepResult struct {
	From, To int
	Name     string
	// Resumed: the step was in progress when this run began.
	Resumed bool
	// Scanned counts the records read; Rewritten those rewritten into the
	// new form (in a plan: those that would be); Skipped those left as
	// they were because they do not decode (logged).
	Scanned, Rewritten, Skipped int64
}

// Result is what a run did.
type Result struct {
	// From is the stored schema the run found, To the one it left.
	From, To int
	Steps    []StepResult
	// Check is the final scan of a run that found nothing to move: records
	// a gateway wrote in the old form after the last step's scans.
	Check *StepResult
}

// Plan is what a run would do now.
type Plan struct {
	// Stored is the stored schema; Target the newest this binary writes.
	Stored, Target int
	// InProgress is the step a stopped run left, if any.
	InProgress *Record
	// Steps are the steps a run would take, with the records each would
	// rewrite.
	Steps []StepResult
	// Blocked are the live gateways that do not read a schema the run
	// would move to.
	Blocked []Gateway
}

func (m *Migrator) keys() etcdstore.Keys  { return m.Store.Keys() }
func (m *Migrator) cli() *clientv3.Client { return m.Store.Client() }

func (m *Migrator) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

func (m *Migrator) sleep(ctx context.Context, d time.Duration) error {
	if m.Sleep != nil {
		return m.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// state is the stored schema and migration record, with the revisions a
// write compares.
type state struct {
	schema    int
	schemaRev int64
	rec       *Record
	recRev    int64
}

func (m *Migrator) read(ctx context.Context) (state, error) {
	resp, err := m.cli().Txn(ctx).Then(clientv3.OpGet(m.keys().Schema()), clientv3.OpGet(m.keys().Migration())).Commit()
	if err != nil {
		return state{}, fmt.Errorf("migrate: read the schema: %w", err)
	}
	st := state{schema: 1}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		var r etcdstore.SchemaRecord
		if err := etcdstore.DecodeKV(etcdstore.SchemaRecordKind, kvs[0], &r); err != nil {
			return state{}, fmt.Errorf("migrate: %w", err)
		}
		st.schema, st.schemaRev = r.Schema, kvs[0].ModRevision
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		var r Record
		if err := etcdstore.DecodeKV(RecordKind, kvs[0], &r); err != nil {
			return state{}, fmt.Errorf("migrate: %w", err)
		}
		st.rec, st.recRev = &r, kvs[0].ModRevision
	}
	if err := etcdstore.ReadsSchema(st.schema); err != nil {
		return state{}, fmt.Errorf("migrate: %w", err)
	}
	if st.rec != nil && !st.rec.Done && st.rec.To != st.schema {
		return state{}, fmt.Errorf("migrate: the migration record moves schema %d to %d, but the stored schema is %d; restore etcd from the snapshot taken before the migration, or ask for help", st.rec.From, st.rec.To, st.schema)
	}
	return st, nil
}

// blocked returns the live gateways that do not read schema n.
func (m *Migrator) blocked(ctx context.Context, n int) ([]Gateway, error) {
	gateways, err := m.Store.Gateways(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var out []Gateway
	for _, g := range gateways {
		if !g.Reads(n) {
			out = append(out, Gateway{ID: g.ID, Release: g.Release, Min: max(g.SchemaMin, 1), Max: max(g.Schema, 1)})
		}
	}
	return out, nil
}

// Plan reads what a run would do now and changes nothing. Any process may
// plan.
func (m *Migrator) Plan(ctx context.Context) (Plan, error) {
	st, err := m.read(ctx)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Stored: st.schema, Target: etcdstore.SchemaVersion}
	if st.rec != nil && !st.rec.Done {
		p.InProgress = st.rec
	}
	from := st.schema
	if p.InProgress != nil {
		from = p.InProgress.From
	}
	for n := from; n < p.Target; n++ {
		step, err := stepFrom(n)
		if err != nil {
			return Plan{}, err
		}
		sr, err := m.count(ctx, step)
		if err != nil {
			return Plan{}, err
		}
		p.Steps = append(p.Steps, sr)
		if n >= st.schema {
			b, err := m.blocked(ctx, step.To())
			if err != nil {
				return Plan{}, err
			}
			p.Blocked = append(p.Blocked, b...)
		}
	}
	return p, nil
}

// count reads every record step would rewrite, rewriting nothing.
func (m *Migrator) count(ctx context.Context, step Step) (StepResult, error) {
	sr := StepResult{From: step.From, To: step.To(), Name: step.Name}
	prefix := step.Prefix(m.keys())
	end := clientv3.GetPrefixRangeEnd(prefix)
	for start := prefix; ; {
		resp, err := m.cli().Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(1000))
		if err != nil {
			return sr, fmt.Errorf("migrate: read %s: %w", prefix, err)
		}
		for _, kv := range resp.Kvs {
			sr.Scanned++
			nv, err := step.Rewrite(string(kv.Key), kv.Value)
			switch {
			case errors.Is(err, etcdstore.ErrNewerRecord):
				return sr, fmt.Errorf("migrate: %w", err)
			case err != nil:
				sr.Skipped++
			case nv != nil:
				sr.Rewritten++
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return sr, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Run moves the stored state to the newest schema this binary writes,
// under term t: it goes on with a step a stopped run left, then takes the
// steps from the stored schema on. force starts steps although live
// gateways do not read their schema. A run that finds nothing to move
// scans the last step's records once more (Result.Check).
func (m *Migrator) Run(ctx context.Context, t sweep.Term, by string, force bool) (Result, error) {
	st, err := m.read(ctx)
	if err != nil {
		return Result{}, err
	}
	res := Result{From: st.schema, To: st.schema}
	if st.rec != nil && !st.rec.Done {
		res.From = st.rec.From
	}
	for {
		if st.rec != nil && !st.rec.Done {
			step, err := stepFrom(st.rec.From)
			if err != nil {
				return res, err
			}
			resumed := st.rec.Term != t.N || st.rec.Scan > 1 || st.rec.Next != ""
			err = m.finish(ctx, t, step, &st)
			res.To = st.schema
			res.Steps = append(res.Steps, st.rec.result(step, resumed))
			if err != nil {
				return res, err
			}
			continue
		}
		if st.schema >= etcdstore.SchemaVersion {
			break
		}
		step, err := stepFrom(st.schema)
		if err != nil {
			return res, err
		}
		if !force {
			b, err := m.blocked(ctx, step.To())
			if err != nil {
				return res, err
			}
			if len(b) > 0 {
				return res, &BlockedError{To: step.To(), Gateways: b}
			}
		}
		if err := m.begin(ctx, t, step, by, &st); err != nil {
			return res, err
		}
		res.To = st.schema
	}
	if len(res.Steps) == 0 && st.rec != nil {
		step, err := stepFrom(st.rec.From)
		if err != nil {
			return res, err
		}
		check := Record{From: step.From, To: step.To()}
		if err := m.scan(ctx, t, step, &check, nil); err != nil {
			return res, err
		}
		sr := check.result(step, false)
		res.Check = &sr
	}
	return res, nil
}

// begin records the schema step moves to and the migration record of its
// first scan, in one fenced transaction that compares both as read.
func (m *Migrator) begin(ctx context.Context, t sweep.Term, step Step, by string, st *state) error {
	now := m.Now().UTC()
	rec := &Record{Version: recordVersion, From: step.From, To: step.To(), Scan: 1, Term: t.N, By: by, Started: now}
	schema, err := jsonValue(etcdstore.SchemaRecord{Version: 1, Schema: step.To(), By: by, At: now})
	if err != nil {
		return err
	}
	val, err := jsonValue(rec)
	if err != nil {
		return err
	}
	resp, err := sweep.FencedTxn(ctx, m.cli(), t, []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(m.keys().Schema()), "=", st.schemaRev),
		clientv3.Compare(clientv3.ModRevision(m.keys().Migration()), "=", st.recRev),
	}, clientv3.OpPut(m.keys().Schema(), schema), clientv3.OpPut(m.keys().Migration(), val))
	if err != nil {
		return fmt.Errorf("migrate: begin schema %d to %d: %w", step.From, step.To(), err)
	}
	m.log().Info("migration step begun: the keyspace is in schema "+fmt.Sprint(step.To())+" now", "from", step.From, "to", step.To(), "step", step.Name, "term", t.N, "by", by)
	st.schema, st.schemaRev, st.rec, st.recRev = step.To(), resp.Header.Revision, rec, resp.Header.Revision
	return nil
}

// finish runs the scans the migration record in st has left, waiting
// Settle before the final one, and records the step done.
func (m *Migrator) finish(ctx context.Context, t sweep.Term, step Step, st *state) error {
	rec := st.rec
	rec.Term = t.N
	for rec.Scan <= 2 {
		if err := m.scan(ctx, t, step, rec, &st.recRev); err != nil {
			return err
		}
		if rec.Scan == 1 {
			settle := m.Settle
			if settle <= 0 {
				settle = DefaultSettle
			}
			if err := m.sleep(ctx, settle); err != nil {
				return err
			}
		}
		rec.Scan++
		rec.Next = ""
		if rec.Scan > 2 {
			rec.Done, rec.Finished = true, m.Now().UTC()
		}
		if err := m.putRecord(ctx, t, rec, &st.recRev); err != nil {
			return err
		}
	}
	m.log().Info("migration step done", "from", rec.From, "to", rec.To, "rewritten", rec.Rewritten, "skipped", rec.Skipped, "term", t.N)
	return nil
}

// putRecord writes rec, comparing the revision it was read or last
// written at, under term t.
func (m *Migrator) putRecord(ctx context.Context, t sweep.Term, rec *Record, rev *int64) error {
	val, err := jsonValue(rec)
	if err != nil {
		return err
	}
	resp, err := sweep.FencedTxn(ctx, m.cli(), t, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(m.keys().Migration()), "=", *rev)},
		clientv3.OpPut(m.keys().Migration(), val))
	if err != nil {
		return fmt.Errorf("migrate: record progress: %w", err)
	}
	*rev = resp.Header.Revision
	return nil
}

// scan rewrites the records of step from rec.Next to the end of its
// prefix, batch by batch. With rev set, each batch also advances rec in
// etcd (comparing *rev), so a stopped scan goes on from the last batch
// written; without, rec only counts.
func (m *Migrator) scan(ctx context.Context, t sweep.Term, step Step, rec *Record, rev *int64) error {
	prefix := step.Prefix(m.keys())
	end := clientv3.GetPrefixRangeEnd(prefix)
	retries := 0
	for {
		start := prefix
		if rec.Next != "" {
			start = rec.Next + "\x00"
		}
		resp, err := m.cli().Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(batchSize))
		if err != nil {
			return fmt.Errorf("migrate: read %s: %w", prefix, err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		next := *rec
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		for _, kv := range resp.Kvs {
			next.Scanned++
			nv, err := step.Rewrite(string(kv.Key), kv.Value)
			switch {
			case errors.Is(err, etcdstore.ErrNewerRecord):
				return fmt.Errorf("migrate: %w", err)
			case err != nil:
				next.Skipped++
				m.log().Warn("migration left a record it cannot read as it was", "key", string(kv.Key), "err", err)
			case nv != nil:
				next.Rewritten++
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
				ops = append(ops, clientv3.OpPut(string(kv.Key), string(nv)))
			}
		}
		next.Next = string(resp.Kvs[len(resp.Kvs)-1].Key)
		if rev != nil {
			val, err := jsonValue(&next)
			if err != nil {
				return err
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(m.keys().Migration()), "=", *rev))
			ops = append(ops, clientv3.OpPut(m.keys().Migration(), val))
		}
		if len(ops) > 0 {
			tr, err := sweep.FencedTxn(ctx, m.cli(), t, cmps, ops...)
			if errors.Is(err, sweep.ErrChanged) && retries < changedRetries {
				// A record of the batch changed since it was read (a part
				// written again, an upload's records deleted): read the
				// batch again.
				retries++
				continue
			}
			if err != nil {
				return fmt.Errorf("migrate: rewrite from %s: %w", start, err)
			}
			if rev != nil {
				*rev = tr.Header.Revision
			}
		}
		retries = 0
		*rec = next
	}
}
