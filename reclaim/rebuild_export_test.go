package reclaim

import (
	"context"
	"log/slog"
	"time"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/s3client"
)

// RebuildPos lets the external tests name a rebuild position.
type RebuildPos = rebuildPos

// TestRebuilder runs the reference rebuild on its own, without an elected
// pass around it, so that the tests can stop and resume it at will.
type TestRebuilder struct{ b *rebuilder }

// NewTestRebuilder returns a rebuilder over backend and store, built the
// way the reclaimer builds its own.
func NewTestRebuilder(backend multipart.Backend, store *etcdstore.Store, sources []cas.Source, batch int, stale time.Duration, log *slog.Logger, now func() time.Time) *TestRebuilder {
	return &TestRebuilder{&rebuilder{
		s3:    s3client.New(backend, 30*time.Second),
		store: store, sources: sources, batch: batch, stale: stale, log: log, now: now,
	}}
}

// Run runs one rebuild from pos.
func (t *TestRebuilder) Run(ctx context.Context, pos RebuildPos, res RebuildResult, save func(RebuildPos, RebuildResult) error) (RebuildResult, error) {
	return t.b.run(ctx, pos, res, save)
}
