package etcdstore_test

import (
	"errors"
	"testing"

	. "github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// recordTypes pairs every record kind of this package with its type.
var recordTypes = []struct {
	kind RecordKind
	new  func() any
}{
	{SessionRecord, func() any { return &Session{} }},
	{PartRecord, func() any { return &Part{} }},
	{ActivityRecord, func() any { return &Activity{} }},
	{IdempotencyRecord, func() any { return &IdempotentOutcome{} }},
	{OrphanRecordKind, func() any { return &OrphanRecord{} }},
	{GatewayRecord, func() any { return &GatewayClock{} }},
	{ElapsedClockRecord, func() any { return &ElapsedClock{} }},
	{CoverageRecord, func() any { return &Coverage{} }},
	{PauseRecord, func() any { return &Pause{} }},
	{WitnessRecord, func() any { return &Witness{} }},
	{RestoredRecord, func() any { return &Restored{} }},
	{RefSourceRecord, func() any { return &RefSource{} }},
	{RefRecord, func() any { return &Ref{} }},
	{TrashRecordKind, func() any { return &TrashRecord{} }},
	{TrashRefRecord, func() any { return &TrashRef{} }},
	{PlacementRecord, func() any { return &Placement{} }},
	{TombstoneRecord, func() any { return &Tombstone{} }},
	{GuardRecord, func() any { return &Guard{} }},
	{FrontierRecord, func() any { return &Frontier{} }},
	{UnrecordedRecord, func() any { return &UnrecordedWrite{} }},
	{SchemaRecordKind, func() any { return &SchemaRecord{} }},
}

// TestEveryRecordKindRefusesNewerLayouts checks, for every kind of record,
// that the version this binary writes decodes, and that a record of a
// newer version, one with a field the layout lacks, and one of a newer
// version whose fields changed type are each a *NewerRecordError that
// leaves nothing of the record in the destination.
func TestEveryRecordKindRefusesNewerLayouts(t *testing.T) {
	for _, rt := range recordTypes {
		t.Run(rt.kind.Name, func(t *testing.T) {
			etcdtest.CheckRecordKind(t, rt.kind, rt.new)
		})
	}
}

// TestRecordWithoutVersionIsVersionOne: kinds written before they carried
// a version read as version 1.
func TestRecordWithoutVersionIsVersionOne(t *testing.T) {
	var p Part
	if err := DecodeRecord(PartRecord, "k", []byte(`{"n":3,"etag":"\"e\"","size":5,"at":"2026-01-02T03:04:05Z"}`), &p); err != nil || p.Number != 3 || p.Size != 5 {
		t.Fatalf("a part without a version: %+v, %v", p, err)
	}
	var a Activity
	if err := DecodeRecord(ActivityRecord, "k", []byte(`{"v":2,"at":"2026-01-02T03:04:05Z","what":"UploadPart"}`), &a); !errors.Is(err, ErrNewerRecord) {
		t.Fatalf("an activity of version 2: %v", err)
	}
}

// TestRecordTypeWithoutVersionPanics: a record type that cannot say its
// version is a programming error, caught by the first decode.
func TestRecordTypeWithoutVersionPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("decoding into a type without a Version field did not panic")
		}
	}()
	var v struct {
		At string `json:"at"`
	}
	_ = DecodeRecord(PartRecord, "k", []byte(`{"at":"x"}`), &v)
}

// TestGatewayReads: a gateway record without schemas reads schema 1 only.
func TestGatewayReads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		g    GatewayClock
		n    int
		want bool
	}{
		{GatewayClock{}, 1, true},
		{GatewayClock{}, 2, false},
		{GatewayClock{Schema: 3, SchemaMin: 2}, 1, false},
		{GatewayClock{Schema: 3, SchemaMin: 2}, 2, true},
		{GatewayClock{Schema: 3, SchemaMin: 2}, 4, false},
		{GatewayClock{Schema: 2}, 1, true},
	} {
		if got := tc.g.Reads(tc.n); got != tc.want {
			t.Errorf("%+v reads %d = %v, want %v", tc.g, tc.n, got, tc.want)
		}
	}
}
