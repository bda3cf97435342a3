package reclaim

import (
	"log/slog"
	"time"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
)

// RebuildPos lets the external tests name a rebuild position.
type RebuildPos = digests.RebuildPos

// TestRebuilder runs the reference rebuild on its own, without an elected
// pass around it, so that the tests can stop and resume it at will.
type TestRebuilder = digests.Rebuilder

// NewTestRebuilder returns a rebuilder over backend and store, built the
// way the reclaimer builds its own: over the reclaimer's S3 client.
func NewTestRebuilder(backend multipart.Backend, store *etcdstore.Store, sources []cas.Source, batch int, stale time.Duration, log *slog.Logger, now func() time.Time) *TestRebuilder {
	return &digests.Rebuilder{
		Backend: digestBackend{s3{b: backend, timeout: 30 * time.Second}},
		Store:   store, Sources: sources, Batch: batch, Stale: stale, Logger: log, Now: now,
	}
}
