package etcdstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A record is the JSON value of one of sweepgate's keys. Every kind of
// record carries the version of its layout in "v" (a record without one
// is version 1: kinds that were written before they carried it), and every
// read of a stored record goes through DecodeRecord or DecodeKV, which
// interpret a record only when this binary knows its layout:
//
//   - a record whose version is newer than the newest this binary reads is
//     a *NewerRecordError, and nothing of it is interpreted;
//   - so is a record with a field this binary's layout does not have: a
//     newer release adds fields only with a new version or schema, so an
//     unknown field is proof of a newer writer. A binary never rewrites a
//     record it could not read whole, so it cannot drop what it does not
//     know.
//
// A request that meets such a record is answered 503; a reclaimer pass
// stops (see docs/upgrading.md).

// SchemaVersion is the newest version of the whole keyspace this binary
// reads and writes: the key layout (Keys) and the record versions written
// under it. A change to either that an older binary would misread raises
// it, and a migration (package migrate) moves stored state from one schema
// to the next. A binary writes the form of the stored schema (see
// Store.WritesSchema), so that while a keyspace stays in an older schema,
// the releases that read only that one read everything it writes.
//
// Schema 2 stores part records in their compact layout (version 2), and
// records a part's start and end without the activity key: the in-flight
// record keeps the upload while the part streams, and the part record's
// time is the activity of its end (UploadState.RecordedActivity), which the
// reclaimer of every release that reads schema 2 judges by.
const SchemaVersion = 2

// MinSchemaVersion is the oldest keyspace schema this binary reads. A
// binary serves a keyspace whose schema lies between MinSchemaVersion and
// SchemaVersion, and refuses to write or sweep any other.
const MinSchemaVersion = 1

// RecordKind names a kind of record and the newest layout version of it
// this binary reads (and writes).
type RecordKind struct {
	Name    string
	Version int
}

// The record kinds of this package's layouts. Domains that own a record of
// their own (the sweeps' cursors) declare its kind beside it.
var (
	SessionRecord      = RecordKind{"session", sessionVersion}
	PartRecord         = RecordKind{"part", 2}
	ActivityRecord     = RecordKind{"activity", 1}
	IdempotencyRecord  = RecordKind{"idempotency outcome", 1}
	OrphanRecordKind   = RecordKind{"orphan decision", orphanRecordVersion}
	GatewayRecord      = RecordKind{"gateway", gatewayVersion}
	ElapsedClockRecord = RecordKind{"elapsed clock", 1}
	CoverageRecord     = RecordKind{"coverage", coverageVersion}
	PauseRecord        = RecordKind{"pause", pauseVersion}
	WitnessRecord      = RecordKind{"restore witness", witnessVersion}
	RestoredRecord     = RecordKind{"restore mark", restoredVersion}
	RefSourceRecord    = RecordKind{"reference source", digestRecordVersion}
	RefRecord          = RecordKind{"reference", digestRecordVersion}
	TrashRecordKind    = RecordKind{"trash", digestRecordVersion}
	TrashRefRecord     = RecordKind{"trash reference", digestRecordVersion}
	PlacementRecord    = RecordKind{"placement", digestRecordVersion}
	TombstoneRecord    = RecordKind{"tombstone", digestRecordVersion}
	GuardRecord        = RecordKind{"guard", digestRecordVersion}
	FrontierRecord     = RecordKind{"frontier", digestRecordVersion}
	UnrecordedRecord   = RecordKind{"unrecorded write", digestRecordVersion}
	SchemaRecordKind   = RecordKind{"schema", 1}
)

// SchemaRecord is the value of Keys.Schema: the keyspace schema the stored
// state is in, written by the migration that moved it there.
type SchemaRecord struct {
	Version int    `json:"v"`
	Schema  int    `json:"schema"`
	By      string `json:"by,omitempty"`
	// At is the writer's wall clock, for the operator.
	At time.Time `json:"at,omitzero"`
}

// StoredSchema reads the keyspace schema the stored state is in: 1 when no
// schema record exists.
func (s *Store) StoredSchema(ctx context.Context) (int, error) {
	resp, err := s.cli.Get(ctx, s.keys.Schema())
	if err != nil {
		return 0, fmt.Errorf("read the keyspace schema: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 1, nil
	}
	var r SchemaRecord
	if err := DecodeKV(SchemaRecordKind, resp.Kvs[0], &r); err != nil {
		return 0, err
	}
	if r.Schema < 1 {
		return 0, fmt.Errorf("etcdstore: the schema record %s names schema %d", resp.Kvs[0].Key, r.Schema)
	}
	return r.Schema, nil
}

// ErrNewerRecord says a stored record was written by a newer release in a
// layout this binary does not read. *NewerRecordError wraps it.
var ErrNewerRecord = errors.New("etcdstore: record written by a newer release")

// NewerRecordError names a record this binary refuses to interpret: its
// kind and key, the version it carries, the newest this binary reads, and,
// when the proof is a field rather than the version, that field.
type NewerRecordError struct {
	Kind    string
	Key     string
	Version int
	Known   int
	Field   string
}

func (e *NewerRecordError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("etcdstore: the %s record %s has a field %q that this release's version %d layout does not: it was written by a newer sweepgate release",
			e.Kind, e.Key, e.Field, e.Known)
	}
	return fmt.Sprintf("etcdstore: the %s record %s has version %d; this release reads versions 1 to %d: it was written by a newer sweepgate release",
		e.Kind, e.Key, e.Version, e.Known)
}

// Unwrap makes errors.Is(err, ErrNewerRecord) hold.
func (e *NewerRecordError) Unwrap() error { return ErrNewerRecord }

// DecodeKV decodes a stored key-value of the given kind into out, a
// pointer to the record's struct, which must have an int field Version
// tagged "v". See DecodeRecord.
func DecodeKV(kind RecordKind, kv *mvccpb.KeyValue, out any) error {
	return decodeRecord(kind, kv.Key, kv.Value, out)
}

// DecodeRecord decodes the value stored at key into out, as DecodeKV. It
// returns a *NewerRecordError for a record of a newer layout and a decode
// error for one that is not JSON of the kind at all; out is then set to
// its zero value, so that nothing of the record can be read from it.
func DecodeRecord(kind RecordKind, key string, value []byte, out any) error {
	return decodeRecord(kind, []byte(key), value, out)
}

func decodeRecord(kind RecordKind, key, value []byte, out any) error {
	err := decodeKnown(kind, key, value, out)
	if err != nil {
		reflect.ValueOf(out).Elem().SetZero()
	}
	return err
}

func decodeKnown(kind RecordKind, key, value []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	err := dec.Decode(out)
	if err == nil {
		v := versionOf(out)
		if v <= kind.Version {
			return nil
		}
		return &NewerRecordError{Kind: kind.Name, Key: string(key), Version: v, Known: kind.Version}
	}
	// A record that does not decode may be of a newer layout whose fields
	// changed: its version, or a field this layout lacks, says so.
	var probe struct {
		V json.Number `json:"v"`
	}
	v := 0
	if json.Unmarshal(value, &probe) == nil {
		n, _ := strconv.Atoi(probe.V.String())
		v = n
	}
	if v > kind.Version {
		return &NewerRecordError{Kind: kind.Name, Key: string(key), Version: v, Known: kind.Version}
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field, _ = strconv.Unquote(field)
		return &NewerRecordError{Kind: kind.Name, Key: string(key), Version: max(v, 1), Known: kind.Version, Field: field}
	}
	return fmt.Errorf("etcdstore: decode the %s record %s: %w", kind.Name, key, err)
}

// versionFields caches, by record type, the index of its Version field.
var versionFields sync.Map // reflect.Type -> []int

// versionOf returns the Version of the record out points to; 0 (no
// version stored) counts as 1.
func versionOf(out any) int {
	rv := reflect.ValueOf(out).Elem()
	idx, ok := versionFields.Load(rv.Type())
	if !ok {
		f, found := rv.Type().FieldByName("Version")
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !found || f.Type.Kind() != reflect.Int || name != "v" {
			panic(fmt.Sprintf("etcdstore: record type %s has no Version int field tagged \"v\"", rv.Type()))
		}
		idx = f.Index
		versionFields.Store(rv.Type(), idx)
	}
	return max(int(rv.FieldByIndex(idx.([]int)).Int()), 1)
}

// ErrSchema says the keyspace is in a schema that a process does not read.
// *SchemaError wraps it.
var ErrSchema = errors.New("etcdstore: the keyspace schema is not one this process reads")

// SchemaError names the stored keyspace schema and the process that does
// not read it: this one (Gateway empty) or a live gateway, with the
// schemas it reads and its release.
type SchemaError struct {
	Stored   int
	Gateway  string
	Release  string
	Min, Max int
}

func (e *SchemaError) Error() string {
	who := "this gateway"
	if e.Gateway != "" {
		who = "the live gateway " + e.Gateway
	}
	if e.Release != "" {
		who += " (sweepgate " + e.Release + ")"
	}
	return fmt.Sprintf("the keyspace is in schema %d, and %s reads schemas %d to %d", e.Stored, who, e.Min, e.Max)
}

// Unwrap makes errors.Is(err, ErrSchema) hold.
func (e *SchemaError) Unwrap() error { return ErrSchema }

// ReadsSchema returns nil when this binary reads keyspace schema n, and a
// *SchemaError otherwise.
func ReadsSchema(n int) error {
	if n < MinSchemaVersion || n > SchemaVersion {
		return &SchemaError{Stored: n, Min: MinSchemaVersion, Max: SchemaVersion}
	}
	return nil
}

// SchemaCheck follows the stored keyspace schema for a gateway: requests
// that write state ask Err, and are refused while the schema is one this
// binary does not read (a keyspace a newer release migrated, or an older
// one that a binary of a later major no longer reads). A read of the
// schema that fails keeps the last answer: etcd's availability is
// Availability's to say.
type SchemaCheck struct {
	store *Store
	log   func(err error)

	mu  sync.Mutex
	err error
	// initDone is set once InitSchema has had an answer from etcd.
	initDone bool
}

// InitSchema starts a new keyspace in this binary's schema, SchemaVersion,
// so that a deployment begins in the newest forms instead of needing a
// migration: it writes the schema record when there is none, no session
// and no part record is stored, no migration has begun, and every live
// gateway reads SchemaVersion. The emptiness is compared in the
// transaction that writes the record, so no record of an older form can
// precede it; a gateway of this release that read the keyspace before
// writes older forms for at most one schema check interval, which this
// binary and the migration both read. It reports whether it wrote the
// record; an answer of etcd that finds the keyspace not new is no error.
func (s *Store) InitSchema(ctx context.Context) (bool, error) {
	resp, err := s.cli.Get(ctx, s.keys.Schema(), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("read the keyspace schema: %w", err)
	}
	if resp.Count > 0 {
		return false, nil
	}
	gateways, err := s.Gateways(ctx)
	if err != nil && !errors.Is(err, ErrNewerRecord) {
		return false, err
	}
	if err != nil {
		return false, nil
	}
	for _, g := range gateways {
		if !g.Reads(SchemaVersion) {
			return false, nil
		}
	}
	val, err := json.Marshal(SchemaRecord{Version: 1, Schema: SchemaVersion, By: "the first gateway of a new keyspace", At: time.Now().UTC()})
	if err != nil {
		return false, err
	}
	absent := func(key string) clientv3.Cmp { return clientv3.Compare(clientv3.CreateRevision(key), "=", 0) }
	txn, err := s.cli.Txn(ctx).If(
		absent(s.keys.Schema()),
		absent(s.keys.Migration()),
		absent(s.keys.AllSessions()).WithPrefix(),
		absent(s.keys.AllParts()).WithPrefix(),
	).Then(clientv3.OpPut(s.keys.Schema(), string(val))).Commit()
	if err != nil {
		return false, fmt.Errorf("start the keyspace schema: %w", err)
	}
	return txn.Succeeded, nil
}

// NewSchemaCheck returns a check of store's keyspace schema; logf, if not
// nil, is told each time the answer changes (nil: the schema is read
// again).
func NewSchemaCheck(store *Store, logf func(err error)) *SchemaCheck {
	return &SchemaCheck{store: store, log: logf}
}

// Check reads the stored schema once and records whether this binary
// reads it. The first check that reaches etcd starts a new keyspace in
// this binary's schema (Store.InitSchema).
func (c *SchemaCheck) Check(ctx context.Context) error {
	c.mu.Lock()
	initDone := c.initDone
	c.mu.Unlock()
	if !initDone {
		if _, err := c.store.InitSchema(ctx); err == nil {
			c.mu.Lock()
			c.initDone = true
			c.mu.Unlock()
		}
	}
	n, err := c.store.StoredSchema(ctx)
	if err != nil && !errors.Is(err, ErrNewerRecord) {
		return err
	}
	if err == nil {
		err = ReadsSchema(n)
	}
	if err == nil {
		c.store.schema.Store(int32(n))
	}
	c.mu.Lock()
	changed := (c.err == nil) != (err == nil)
	c.err = err
	c.mu.Unlock()
	if changed && c.log != nil {
		c.log(err)
	}
	return err
}

// Run checks every interval until ctx ends.
func (c *SchemaCheck) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_ = c.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Err returns nil while the last check found a schema this binary reads
// (or none was made yet), else why not: a *SchemaError, or the schema
// record's *NewerRecordError.
func (c *SchemaCheck) Err() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
