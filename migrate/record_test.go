package migrate

import (
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestMigrationRecordRefusesNewerLayouts: a migration record of a newer
// layout is refused, not misread.
func TestMigrationRecordRefusesNewerLayouts(t *testing.T) {
	etcdtest.CheckRecordKind(t, RecordKind, func() any { return &Record{} })
}
