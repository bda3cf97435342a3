//go:build integration

package etcdstore

import (
	"errors"
	"fmt"
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
