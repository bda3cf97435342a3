//go:build integration

package migrate

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/sweep"
)

// world is a keyspace in schema 1 with parts of several uploads, and a
// term held by a leader key of the test's own.
type world struct {
	store *etcdstore.Store
	parts map[string]etcdstore.Part // by key, as written
	term  sweep.Term
}

func newWorld(t *testing.T, uploads, perUpload int) *world {
	t.Helper()
	store := etcdtest.NewStore(t, "/mig/")
	w := &world{store: store, parts: map[string]etcdstore.Part{}}
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for u := range uploads {
		id := fmt.Sprintf("upload-%03d", u)
		for n := 1; n <= perUpload; n++ {
			p := etcdstore.Part{Number: n, ETag: fmt.Sprintf(`"%032x"`, u*1000+n), Size: int64(n) << 10,
				SHA256: fmt.Sprintf("%064x", u*1000+n), At: at.Add(time.Duration(n) * time.Second)}
			w.put(t, id, p)
		}
	}
	w.term = w.lead(t)
	return w
}

func (w *world) put(t *testing.T, uploadID string, p etcdstore.Part) {
	t.Helper()
	if err := w.store.PutPart(t.Context(), uploadID, p); err != nil {
		t.Fatal(err)
	}
	p.Version = etcdstore.PartLayout(w.store.WritesSchema())
	w.parts[w.store.Keys().Part(uploadID, p.Number)] = p
}

// lead puts a leader key and returns the term it holds.
func (w *world) lead(t *testing.T) sweep.Term {
	t.Helper()
	key := w.store.Keys().Root() + fmt.Sprintf("test-leader/%d", time.Now().UnixNano())
	resp, err := w.store.Client().Put(t.Context(), key, "me")
	if err != nil {
		t.Fatal(err)
	}
	return sweep.Term{N: resp.Header.Revision, Key: key}
}

func (w *world) migrator(sleep func(context.Context, time.Duration) error) *Migrator {
	return &Migrator{Store: w.store, Now: time.Now, Sleep: sleep}
}

func noWait(context.Context, time.Duration) error { return nil }

// requireParts checks every part record against what was written: the
// same part, stored in layout want.
func (w *world) requireParts(t *testing.T, want int) {
	t.Helper()
	resp, err := w.store.Client().Get(t.Context(), w.store.Keys().AllParts(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != len(w.parts) {
		t.Fatalf("%d part records, want %d", len(resp.Kvs), len(w.parts))
	}
	for _, kv := range resp.Kvs {
		got, err := etcdstore.DecodePart(string(kv.Key), kv.Value)
		if err != nil {
			t.Fatalf("%s: %v", kv.Key, err)
		}
		exp := w.parts[string(kv.Key)]
		exp.Version = want
		if !got.At.Equal(exp.At) {
			t.Fatalf("%s: at %v, want %v", kv.Key, got.At, exp.At)
		}
		got.At, exp.At = time.Time{}, time.Time{}
		if got != exp {
			t.Fatalf("%s: %+v (%s), want %+v", kv.Key, got, kv.Value, exp)
		}
	}
}

func (w *world) storedSchema(t *testing.T) int {
	t.Helper()
	n, err := w.store.StoredSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMigrationPlansThenMovesEveryPart: the plan counts what a run would
// rewrite and changes nothing; the run records schema 2 and rewrites
// every part into the compact layout, each reading back as written; a
// second run finds nothing to move.
func TestMigrationPlansThenMovesEveryPart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 7, 30)
	m := w.migrator(noWait)
	plan, err := m.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Stored != 1 || plan.Target != 2 || len(plan.Steps) != 1 || plan.Steps[0].Rewritten != 210 || plan.Steps[0].Scanned != 210 || len(plan.Blocked) != 0 {
		t.Fatalf("plan %+v, want one step rewriting all 210 parts", plan)
	}
	if w.storedSchema(t) != 1 {
		t.Fatal("the plan changed the stored schema")
	}
	w.requireParts(t, 1)

	res, err := m.Run(t.Context(), w.term, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.From != 1 || res.To != 2 || len(res.Steps) != 1 || res.Steps[0].Rewritten != 210 || res.Steps[0].Resumed {
		t.Fatalf("run %+v, want schema 1 to 2 with 210 parts rewritten", res)
	}
	if w.storedSchema(t) != 2 {
		t.Fatal("the run did not record schema 2")
	}
	w.requireParts(t, 2)

	again, err := m.Run(t.Context(), w.term, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Steps) != 0 || again.Check == nil || again.Check.Scanned != 210 || again.Check.Rewritten != 0 {
		t.Fatalf("second run %+v, want only a check that rewrites nothing", again)
	}
	plan, err = m.Plan(t.Context())
	if err != nil || plan.Stored != 2 || len(plan.Steps) != 0 || plan.InProgress != nil {
		t.Fatalf("plan after the migration: %+v, %v", plan, err)
	}
}

// TestMigrationWaitsForEveryGateway: a live gateway that does not read
// schema 2 holds the migration back, named, and nothing changes; forced,
// the migration runs.
func TestMigrationWaitsForEveryGateway(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2, 5)
	old, _ := jsonValue(etcdstore.GatewayClock{Version: 1, ID: "gw-old", Release: "1.0.0", Schema: 1, SchemaMin: 1, At: time.Now()})
	current, _ := jsonValue(etcdstore.GatewayClock{Version: 1, ID: "gw-new", Release: "1.1.0", Schema: 2, SchemaMin: 1, At: time.Now()})
	for id, v := range map[string]string{"gw-old": old, "gw-new": current} {
		if _, err := w.store.Client().Put(t.Context(), w.store.Keys().Gateways()+id, v); err != nil {
			t.Fatal(err)
		}
	}
	m := w.migrator(noWait)
	plan, err := m.Plan(t.Context())
	if err != nil || len(plan.Blocked) != 1 || plan.Blocked[0].ID != "gw-old" || plan.Blocked[0].Release != "1.0.0" {
		t.Fatalf("plan %+v, %v; want gw-old named", plan, err)
	}
	_, err = m.Run(t.Context(), w.term, "test", false)
	var blocked *BlockedError
	if !errors.As(err, &blocked) || !errors.Is(err, ErrBlocked) || len(blocked.Gateways) != 1 || blocked.Gateways[0].ID != "gw-old" {
		t.Fatalf("run: %v; want it held back by gw-old", err)
	}
	if w.storedSchema(t) != 1 {
		t.Fatal("a held-back migration changed the stored schema")
	}
	w.requireParts(t, 1)
	if _, err := m.Run(t.Context(), w.term, "test", true); err != nil {
		t.Fatalf("forced: %v", err)
	}
	w.requireParts(t, 2)
}

// TestMigrationStoppedByItsTermResumes: a leader that loses its term in
// the middle of a step writes nothing more; the next leader's run goes on
// from the record, converts a part a gateway wrote in the old form after
// the first scan had passed it, and ends with every part in the new form.
func TestMigrationStoppedByItsTermResumes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 4, 40)
	first := w.migrator(func(ctx context.Context, d time.Duration) error {
		// Between the scans: a gateway that has not read schema 2 yet
		// writes a part in the old form, and the term ends.
		w.put(t, "upload-000", etcdstore.Part{Number: 41, ETag: `"late"`, Size: 9, At: time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC)})
		if _, err := w.store.Client().Delete(ctx, w.term.Key); err != nil {
			return err
		}
		return nil
	})
	_, err := first.Run(t.Context(), w.term, "test", false)
	if !errors.Is(err, sweep.ErrFenced) {
		t.Fatalf("run whose term ended: %v, want ErrFenced", err)
	}
	if w.storedSchema(t) != 2 {
		t.Fatal("the stopped run did not record schema 2 at its start")
	}
	plan, err := first.Plan(t.Context())
	if err != nil || plan.InProgress == nil || plan.InProgress.Scan != 1 || plan.InProgress.Rewritten != 160 {
		t.Fatalf("plan after the stop: %+v, %v; want the first scan in progress, 160 rewritten", plan, err)
	}
	next := w.lead(t)
	res, err := w.migrator(noWait).Run(t.Context(), next, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 1 || !res.Steps[0].Resumed || res.Steps[0].Rewritten != 161 {
		t.Fatalf("resumed run %+v, want the step resumed with 161 parts rewritten in all", res)
	}
	w.requireParts(t, 2)
}

// TestMigrationNeverOverwritesANewerWrite: a record a gateway writes
// between the migration's read and its write is read again, so the
// migration writes the new value's compact form, never the old one's.
func TestMigrationNeverOverwritesANewerWrite(t *testing.T) {
	w := newWorld(t, 1, 3)
	key := w.store.Keys().Part("upload-000", 2)
	raced := false
	saved := steps
	t.Cleanup(func() { steps = saved })
	racing := compactParts
	racing.Rewrite = func(k string, v []byte) ([]byte, error) {
		if k == key && !raced {
			raced = true
			w.put(t, "upload-000", etcdstore.Part{Number: 2, ETag: `"again"`, Size: 77, At: time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)})
		}
		return compactParts.Rewrite(k, v)
	}
	steps = []Step{racing}
	if _, err := w.migrator(noWait).Run(t.Context(), w.term, "test", false); err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("the race was not run")
	}
	w.requireParts(t, 2)
}

// TestMigrationRefusesNewerRecords: a part of a layout newer than this
// binary reads stops the migration; it is never rewritten.
func TestMigrationRefusesNewerRecords(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 1, 2)
	key := w.store.Keys().Part("upload-000", 9)
	if _, err := w.store.Client().Put(t.Context(), key, `{"v":3,"n":9}`); err != nil {
		t.Fatal(err)
	}
	_, err := w.migrator(noWait).Run(t.Context(), w.term, "test", false)
	if !errors.Is(err, etcdstore.ErrNewerRecord) {
		t.Fatalf("run: %v, want the newer record refused", err)
	}
	resp, err := w.store.Client().Get(t.Context(), key)
	if err != nil || string(resp.Kvs[0].Value) != `{"v":3,"n":9}` {
		t.Fatalf("the newer record was changed: %v %v", resp, err)
	}
}
