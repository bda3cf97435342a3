package digestsweep

import (
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestDigestSweepRecordsRefuseNewerLayouts: the digest sweep's cursor and
// its last rebuild's record are read through the versioned decoder.
func TestDigestSweepRecordsRefuseNewerLayouts(t *testing.T) {
	etcdtest.CheckRecordKind(t, digestCursorRecord, func() any { return &digestCursor{} })
	etcdtest.CheckRecordKind(t, lastRebuildRecord, func() any { return &lastRebuild{} })
}
