package reclaim

import (
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestUploadSweepRecordsRefuseNewerLayouts: the upload sweep's cursor,
// plan chunks and pass reports are read through the versioned decoder.
func TestUploadSweepRecordsRefuseNewerLayouts(t *testing.T) {
	etcdtest.CheckRecordKind(t, cursorRecord, func() any { return &cursor{} })
	etcdtest.CheckRecordKind(t, chunkRecord, func() any { return &chunk{} })
	etcdtest.CheckRecordKind(t, reportRecord, func() any { return &Report{} })
}
