package etcdtest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// CheckRecordKind checks the versioned decoder for one kind of record,
// whose records newRecord makes: the version this binary writes decodes,
// and a record of a newer version, one with a field the layout lacks, and
// one of a newer version whose fields changed type are each refused as a
// *etcdstore.NewerRecordError that leaves nothing of the record in the
// destination.
func CheckRecordKind(t *testing.T, kind etcdstore.RecordKind, newRecord func() any) {
	t.Helper()
	sample := sampleRecord(t, newRecord())
	current := withFields(t, sample, map[string]any{"v": kind.Version})
	out := newRecord()
	if err := etcdstore.DecodeRecord(kind, "k", current, out); err != nil {
		t.Fatalf("the current layout (%s) does not decode: %v", current, err)
	}
	if got := max(reflect.ValueOf(out).Elem().FieldByName("Version").Int(), 1); got != int64(kind.Version) {
		t.Errorf("decoded version %d, want %d", got, kind.Version)
	}

	for _, tc := range []struct {
		name    string
		value   []byte
		version int
		field   string
	}{
		{"newer version", withFields(t, sample, map[string]any{"v": kind.Version + 1}), kind.Version + 1, ""},
		{"unknown field", withFields(t, sample, map[string]any{"v": kind.Version, "added_later": true}), kind.Version, "added_later"},
		{"unknown field, no version", withFields(t, sample, map[string]any{"v": nil, "added_later": 1}), 1, "added_later"},
		{"newer version, fields changed", []byte(`{"v":` + strconv.Itoa(kind.Version+1) + `,"at":{"changed":[1]},"state":7,"bucket":[]}`), kind.Version + 1, ""},
	} {
		out := newRecord()
		err := etcdstore.DecodeRecord(kind, "/sweepgate/x", tc.value, out)
		var newer *etcdstore.NewerRecordError
		if !errors.As(err, &newer) || !errors.Is(err, etcdstore.ErrNewerRecord) {
			t.Errorf("%s (%s): got %v, want a *etcdstore.NewerRecordError", tc.name, tc.value, err)
			continue
		}
		if newer.Kind != kind.Name || newer.Key != "/sweepgate/x" || newer.Version != tc.version || newer.Known != kind.Version || newer.Field != tc.field {
			t.Errorf("%s: got %+v", tc.name, *newer)
		}
		if !strings.Contains(err.Error(), kind.Name) || !strings.Contains(err.Error(), "newer sweepgate release") {
			t.Errorf("%s: the error does not name the record and its cause: %v", tc.name, err)
		}
		if !reflect.ValueOf(out).Elem().IsZero() {
			t.Errorf("%s: the refused record was left in the destination: %+v", tc.name, out)
		}
	}

	if err := etcdstore.DecodeRecord(kind, "k", []byte(`{"v":`), newRecord()); err == nil || errors.Is(err, etcdstore.ErrNewerRecord) {
		t.Errorf("a value that is not JSON: got %v, want a decode error", err)
	}
}

// sampleRecord returns rec as its JSON object, for a test to change.
func sampleRecord(t *testing.T, rec any) map[string]any {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// withFields returns sample with fields set (a nil value removes one),
// encoded.
func withFields(t *testing.T, sample, fields map[string]any) []byte {
	t.Helper()
	m := make(map[string]any, len(sample)+len(fields))
	for k, v := range sample {
		m[k] = v
	}
	for k, v := range fields {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
