package migrate

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// recordVersion is the version of the migration record's layout.
const recordVersion = 1

// RecordKind is the migration record's kind for the versioned decoder.
var RecordKind = etcdstore.RecordKind{Name: "migration", Version: recordVersion}

// Record is the value of Keys.Migration: the step in progress, or the last
// one done, and how far its scans got.
type Record struct {
	Version int `json:"v"`
	// From and To are the schemas the step moves between.
	From int `json:"from"`
	To   int `json:"to"`
	// Scan is the scan in progress: 1, the first; 2, the final one after
	// the settle wait.
	Scan int `json:"scan"`
	// Next is the last key the scan has passed ("" at its start).
	Next string `json:"next,omitempty"`
	// Scanned, Rewritten and Skipped count over both scans.
	Scanned   int64 `json:"scanned"`
	Rewritten int64 `json:"rewritten"`
	Skipped   int64 `json:"skipped,omitempty"`
	// Term is the reclaimer term that wrote the record last; By who asked
	// for the migration.
	Term int64  `json:"term"`
	By   string `json:"by,omitempty"`
	// Started and Finished are the writer's wall clock, for the operator.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	Done     bool      `json:"done,omitempty"`
}

func (r *Record) result(step Step, resumed bool) StepResult {
	return StepResult{From: r.From, To: r.To, Name: step.Name, Resumed: resumed, Scanned: r.Scanned, Rewritten: r.Rewritten, Skipped: r.Skipped}
}

func jsonValue(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("migrate: encode: %w", err)
	}
	return string(b), nil
}
