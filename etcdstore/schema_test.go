//go:build integration

package etcdstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestSchemaCheckFollowsTheStoredSchema: a keyspace without a schema
// record is in schema 1; a stored schema this binary reads is the one its
// store writes; a stored schema this binary does not read, or a schema
// record of a newer layout, makes Err refuse, and the answer follows the
// record back.
func TestSchemaCheckFollowsTheStoredSchema(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	var changes []error
	c := NewSchemaCheck(s, func(err error) { changes = append(changes, err) })
	if n, err := s.StoredSchema(t.Context()); err != nil || n != 1 {
		t.Fatalf("StoredSchema without a record = %d, %v; want 1", n, err)
	}
	if err := c.Check(t.Context()); err != nil || c.Err() != nil {
		t.Fatalf("Check without a record: %v", err)
	}
	put := func(v string) {
		t.Helper()
		if _, err := s.Client().Put(t.Context(), s.Keys().Schema(), v); err != nil {
			t.Fatal(err)
		}
	}
	put(`{"v":1,"schema":2,"by":"a migration"}`)
	if err := c.Check(t.Context()); err != nil || s.WritesSchema() != 2 {
		t.Fatalf("Check in schema 2: %v, writes schema %d; want schema 2 read and written", err, s.WritesSchema())
	}
	later := SchemaVersion + 1
	put(fmt.Sprintf(`{"v":1,"schema":%d,"by":"a later release"}`, later))
	_ = c.Check(t.Context())
	var se *SchemaError
	if !errors.As(c.Err(), &se) || se.Stored != later || se.Max != SchemaVersion || !errors.Is(c.Err(), ErrSchema) {
		t.Fatalf("Err in schema %d = %v; want a *SchemaError", later, c.Err())
	}
	if s.WritesSchema() != 2 {
		t.Errorf("a schema this binary does not read changed the schema it writes to %d", s.WritesSchema())
	}
	put(`{"v":2,"schema":1}`)
	_ = c.Check(t.Context())
	if !errors.Is(c.Err(), ErrNewerRecord) {
		t.Fatalf("Err with a schema record of layout 2 = %v; want a *NewerRecordError", c.Err())
	}
	put(`{"v":1,"schema":1}`)
	if err := c.Check(t.Context()); err != nil || c.Err() != nil || s.WritesSchema() != 1 {
		t.Fatalf("Check in schema 1 again: %v, writes schema %d", err, s.WritesSchema())
	}
	if len(changes) != 2 || changes[0] == nil || changes[1] != nil {
		t.Errorf("changes told: %v; want the refusal, then nil", changes)
	}
	var nilCheck *SchemaCheck
	if nilCheck.Err() != nil {
		t.Error("a nil check refuses")
	}
}

// TestNewKeyspaceStartsInTheNewestSchema: the first check of a keyspace
// with nothing in it writes this binary's schema, so a new deployment
// writes the newest forms without a migration; a keyspace that holds a
// session or a part record, or has a live gateway that does not read the
// newest schema, stays in schema 1 until a migration moves it.
func TestNewKeyspaceStartsInTheNewestSchema(t *testing.T) {
	t.Parallel()
	base := newTestStore(t)
	storeAt := func(prefix string) *Store {
		t.Helper()
		keys, err := NewKeys(prefix)
		if err != nil {
			t.Fatal(err)
		}
		return NewStore(base.Client(), keys)
	}
	put := func(key, val string) {
		t.Helper()
		if _, err := base.Client().Put(t.Context(), key, val); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		seed func(s *Store)
		want int
	}{
		{"empty", func(*Store) {}, SchemaVersion},
		{"a live gateway of this release", func(s *Store) {
			put(s.Keys().Gateway("g1"), fmt.Sprintf(`{"v":1,"id":"g1","schema":%d,"schema_min":%d}`, SchemaVersion, MinSchemaVersion))
		}, SchemaVersion},
		{"a session", func(s *Store) { putUpload(t, s, "b", "u1", StateActive) }, 1},
		{"a part record only", func(s *Store) { put(s.Keys().Part("u1", 1), `{"v":1,"n":1}`) }, 1},
		{"a live gateway of 1.0.0", func(s *Store) { put(s.Keys().Gateway("old"), `{"v":1,"id":"old"}`) }, 1},
	} {
		s := storeAt("/init-" + strings.ReplaceAll(tc.name, " ", "-") + "/")
		tc.seed(s)
		if err := NewSchemaCheck(s, nil).Check(t.Context()); err != nil {
			t.Fatalf("%s: Check: %v", tc.name, err)
		}
		n, err := s.StoredSchema(t.Context())
		if err != nil || n != tc.want || s.WritesSchema() != tc.want {
			t.Errorf("%s: stored schema %d (%v), writes %d; want %d", tc.name, n, err, s.WritesSchema(), tc.want)
		}
		if wrote, err := s.InitSchema(t.Context()); wrote || err != nil {
			t.Errorf("%s: a second InitSchema wrote %v (%v); want nothing", tc.name, wrote, err)
		}
	}
}
