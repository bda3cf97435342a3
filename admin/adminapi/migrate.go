package adminapi

import "time"

// The error codes of /admin/v1/migrate/plan and /run.
const (
	// CodeMigrationBlocked: a live gateway does not read the schema the
	// migration moves to (MigrationBlocked names them).
	CodeMigrationBlocked = "migration_blocked"
	// CodeMigrationFailed: the migration stopped (etcd failed, the term
	// ended, a record of a newer release); running it again goes on.
	CodeMigrationFailed = "migration_failed"
)

// MigrationRequest is the body of POST /admin/v1/migrate/run.
type MigrationRequest struct {
	// Principal is who runs the migration, recorded with it.
	Principal string `json:"principal"`
	// Force runs the migration although live gateways do not read the new
	// schema: they then refuse every request that writes state.
	Force bool `json:"force,omitempty"`
}

// MigrationStep is what one step did, or in a plan would do.
type MigrationStep struct {
	From      int    `json:"from"`
	To        int    `json:"to"`
	Name      string `json:"name"`
	Resumed   bool   `json:"resumed,omitempty"`
	Scanned   int64  `json:"scanned"`
	Rewritten int64  `json:"rewritten"`
	Skipped   int64  `json:"skipped,omitempty"`
}

// MigrationGateway is a live gateway and the schemas it reads.
type MigrationGateway struct {
	ID        string `json:"id"`
	Release   string `json:"release"`
	SchemaMin int    `json:"schema_min"`
	Schema    int    `json:"schema"`
}

// MigrationProgress is the stored record of a step: in progress, or the
// last one done.
type MigrationProgress struct {
	From      int       `json:"from"`
	To        int       `json:"to"`
	Scan      int       `json:"scan"`
	Next      string    `json:"next,omitempty"`
	Rewritten int64     `json:"rewritten"`
	Term      int64     `json:"term"`
	By        string    `json:"by,omitempty"`
	Started   time.Time `json:"started"`
}

// MigrationPlan is the answer of GET /admin/v1/migrate/plan: what a run would
// do now. It changes nothing.
type MigrationPlan struct {
	// Shard is the etcd shard planned (etcd.shards); absent without
	// shards.
	Shard      string             `json:"shard,omitempty"`
	Stored     int                `json:"stored_schema"`
	Target     int                `json:"target_schema"`
	InProgress *MigrationProgress `json:"in_progress,omitempty"`
	Steps      []MigrationStep    `json:"steps"`
	Blocked    []MigrationGateway `json:"blocked,omitempty"`
}

// MigrationResult is the answer of POST /admin/v1/migrate/run.
type MigrationResult struct {
	// Shard is the etcd shard migrated (etcd.shards); absent without
	// shards.
	Shard string          `json:"shard,omitempty"`
	From  int             `json:"from_schema"`
	To    int             `json:"to_schema"`
	Steps []MigrationStep `json:"steps"`
	// Check is the final scan of a run that found nothing to move.
	Check *MigrationStep `json:"check,omitempty"`
	// Term is the reclaimer term the migration ran under.
	Term int64 `json:"term"`
}

// MigrationBlocked is the answer (409) of a migration held back by live
// gateways that do not read the new schema.
type MigrationBlocked struct {
	Error    ErrorDetail        `json:"error"`
	To       int                `json:"to_schema"`
	Gateways []MigrationGateway `json:"gateways"`
}
