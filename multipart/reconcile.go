package multipart

import (
	"context"
	"time"
)

// ReconcileOptions say which sessions the reconciler looks at.
type ReconcileOptions struct {
	// After is how long a session must have stood in aborting,
	// cleanup_pending or completing before the reconciler acts on it.
	After time.Duration
	// StuckLimit flags a session completing for longer than this.
	StuckLimit time.Duration
	// Retention is how long terminal sessions are kept before pruning;
	// zero keeps them.
	Retention time.Duration
	// Actor is recorded on the transitions it makes ("reconciler", or the
	// reclaimer with its term).
	Actor string
}

// ReconcileReport counts what one reconciler run found and did.
type ReconcileReport struct {
	Examined  int `json:"examined"`
	Aborted   int `json:"aborted"`
	Completed int `json:"completed"`
	Retried   int `json:"retried"`
	Stuck     int `json:"stuck"`
	Pruned    int `json:"pruned"`
	Errors    int `json:"errors"`
}

// Reconcile settles sessions whose last backend call had an unclear outcome
// by looking at the backend again. TODO(issue 3): implementation.
func (s *Service) Reconcile(ctx context.Context, opts ReconcileOptions) (ReconcileReport, error) {
	return ReconcileReport{}, nil
}
