package reclaim

import (
	"errors"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestSchemaGate: a pass runs only while this binary and every live
// gateway read the stored keyspace schema; a gateway record without
// schemas reads schema 1 only.
func TestSchemaGate(t *testing.T) {
	cur := etcdstore.SchemaVersion
	this := etcdstore.GatewayClock{ID: "a", Release: "1.0.0", Schema: cur, SchemaMin: etcdstore.MinSchemaVersion}
	for _, tc := range []struct {
		name     string
		stored   int
		gateways []etcdstore.GatewayClock
		stopBy   string // "": runs; "self": this binary; else the gateway's id
	}{
		{"current schema, current gateways", cur, []etcdstore.GatewayClock{this, this}, ""},
		{"no gateways", cur, nil, ""},
		{"a schema newer than this binary's", cur + 1, []etcdstore.GatewayClock{this}, "self"},
		{"a schema older than this binary reads", etcdstore.MinSchemaVersion - 1, nil, "self"},
		{"a gateway of a newer major that no longer reads it", cur, []etcdstore.GatewayClock{this, {ID: "b", Release: "9.0.0", Schema: cur + 2, SchemaMin: cur + 1}}, "b"},
		{"a gateway that reads only older schemas", cur, []etcdstore.GatewayClock{{ID: "c", Schema: cur - 1, SchemaMin: 1}}, "c"},
		{"a gateway that publishes no schemas reads schema 1", 1, []etcdstore.GatewayClock{{ID: "d"}}, ""},
	} {
		if tc.stored < etcdstore.MinSchemaVersion-1 || (tc.stopBy == "c" && cur == 1) {
			continue // the case needs a schema this build does not have
		}
		err := schemaGate(tc.stored, tc.gateways)
		var se *etcdstore.SchemaError
		switch {
		case tc.stopBy == "" && err != nil:
			t.Errorf("%s: stopped: %v", tc.name, err)
		case tc.stopBy == "":
		case !errors.As(err, &se) || !errors.Is(err, ErrSchema):
			t.Errorf("%s: got %v, want a *SchemaError", tc.name, err)
		case tc.stopBy == "self" && se.Gateway != "", tc.stopBy != "self" && se.Gateway != tc.stopBy:
			t.Errorf("%s: stopped by %q, want %q: %v", tc.name, se.Gateway, tc.stopBy, err)
		case !strings.Contains(err.Error(), "nothing marked or deleted"):
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
