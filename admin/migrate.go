package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/migrate"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/sweep"
)

// migrateAPI serves /admin/v1/migrate/plan and /run: any gateway plans; the elected
// reclaimer runs the migration under its term.
type migrateAPI struct {
	// m is nil when sessions are off (no keyspace).
	m       *migrate.Migrator
	reclaim *reclaimAPI
}

func (a migrateAPI) routes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	handleRoutes(mux, protect, []route{
		{http.MethodGet, "/admin/v1/migrate/plan", a.plan},
		{http.MethodPost, "/admin/v1/migrate/run", a.run},
	})
}

func (a migrateAPI) enabled(w http.ResponseWriter) bool {
	if a.m == nil {
		writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeSessionsDisabled, "sessions are off: this gateway keeps no state in etcd to migrate")
		return false
	}
	return true
}

func (a migrateAPI) plan(w http.ResponseWriter, r *http.Request) {
	if !a.enabled(w) {
		return
	}
	p, err := a.m.Plan(r.Context())
	if err != nil {
		writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeMigrationFailed, "plan the migration: "+err.Error())
		return
	}
	out := adminapi.MigrationPlan{Shard: a.reclaim.shard, Stored: p.Stored, Target: p.Target, Steps: migrationSteps(p.Steps), Blocked: migrationGateways(p.Blocked)}
	if rec := p.InProgress; rec != nil {
		out.InProgress = &adminapi.MigrationProgress{From: rec.From, To: rec.To, Scan: rec.Scan, Next: rec.Next,
			Rewritten: rec.Rewritten, Term: rec.Term, By: rec.By, Started: rec.Started}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a migrateAPI) run(w http.ResponseWriter, r *http.Request) {
	var req adminapi.MigrationRequest
	if !a.enabled(w) || !a.reclaim.enabled(w) || !readJSON(w, r, &req) {
		return
	}
	if req.Principal == "" {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, "principal: who migrates is recorded with the migration")
		return
	}
	if _, ok := a.reclaim.r.Leader(); !ok {
		a.reclaim.writeNotLeader(w, r, "run a migration")
		return
	}
	noWriteDeadline(w)
	var res migrate.Result
	var term int64
	err := a.reclaim.r.RunFenced(r.Context(), func(ctx context.Context, t sweep.Term) error {
		term = t.N
		var err error
		res, err = a.m.Run(ctx, t, req.Principal, req.Force)
		return err
	})
	var blocked *migrate.BlockedError
	switch {
	case errors.Is(err, reclaim.ErrNotLeader):
		a.reclaim.writeNotLeader(w, r, "run a migration")
		return
	case errors.As(err, &blocked):
		writeJSON(w, http.StatusConflict, adminapi.MigrationBlocked{
			Error: adminapi.ErrorDetail{Code: adminapi.CodeMigrationBlocked, Message: blocked.Error()},
			To:    blocked.To, Gateways: migrationGateways(blocked.Gateways)})
		return
	case err != nil:
		a.reclaim.log.Warn("admin API: migration stopped", "err", err)
		writeAPIError(w, http.StatusServiceUnavailable, adminapi.CodeMigrationFailed, "the migration stopped, and running it again goes on from where it stopped: "+err.Error())
		return
	}
	out := adminapi.MigrationResult{Shard: a.reclaim.shard, From: res.From, To: res.To, Steps: migrationSteps(res.Steps), Term: term}
	if res.Check != nil {
		c := migrationSteps([]migrate.StepResult{*res.Check})[0]
		out.Check = &c
	}
	writeJSON(w, http.StatusOK, out)
}

func migrationSteps(in []migrate.StepResult) []adminapi.MigrationStep {
	out := make([]adminapi.MigrationStep, 0, len(in))
	for _, s := range in {
		out = append(out, adminapi.MigrationStep{From: s.From, To: s.To, Name: s.Name, Resumed: s.Resumed,
			Scanned: s.Scanned, Rewritten: s.Rewritten, Skipped: s.Skipped})
	}
	return out
}

func migrationGateways(in []migrate.Gateway) []adminapi.MigrationGateway {
	var out []adminapi.MigrationGateway
	for _, g := range in {
		out = append(out, adminapi.MigrationGateway{ID: g.ID, Release: g.Release, SchemaMin: g.Min, Schema: g.Max})
	}
	return out
}
