package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/sweep"
)

// The breaker stays tripped. A plan the breaker refuses pauses its sweep:
// a record under etcdstore.Keys.Pause, written fenced in the same
// transaction as the refused pass's report (the upload sweep) or cursor
// (the digest sweep). While it exists, every pass of any leader still plans
// and reports, and acts on nothing: the upload sweep marks and aborts
// nothing, the digest sweep's collector deletes nothing. Only a person
// removes it (Resume), and that is audited.

// The sweeps a pause names.
const (
	PauseUploads = uploadSweep
	PauseDigests = digestsweep.CursorName
)

// pauseSweeps are the sweeps that can be paused, in the order they are
// shown.
var pauseSweeps = []string{PauseUploads, PauseDigests}

// check decides whether the plan may be acted on, with the settings of now:
// not while the upload sweep is paused, nor when the breaker refuses it. A
// refusal in a real pass of a sweep not yet paused is recorded as the
// pause that finish writes with the report. It returns why the plan is not
// acted on, "" when it is.
func (p *pass) check(ctx context.Context) (string, error) {
	r := p.r
	refused := r.breaker(p.cur.Tally.Uploads, &p.cur.Breaker)
	if p.restored != "" {
		// Read first, so that no pause is recorded on a plan made from
		// records etcd may have lost.
		r.log.Warn("etcd was restored: the upload sweep marks and deletes nothing", "pass", p.cur.Pass, "why", p.restored)
		return p.restored, nil
	}
	cur, err := r.store.GetPause(ctx, PauseUploads)
	switch {
	case err == nil:
		pz := cur.Value
		why := sweep.Paused(PauseUploads, pz.Pass, pz.Term, pz.At, pz.Reason)
		if refused != "" {
			why += "; this plan is refused too: " + refused
		}
		p.paused = true
		r.log.Warn("the upload sweep is paused: nothing marked or deleted", "pass", p.cur.Pass, "why", why)
		return why, nil
	case !errors.Is(err, etcdstore.ErrNotFound):
		return "", fmt.Errorf("reclaim: %w", err)
	case refused == "":
		return "", nil
	case p.dry:
		r.log.Warn("the breaker would refuse this plan", "pass", p.cur.Pass, "refused", refused)
		return refused, nil
	}
	r.log.Error("reclaim pass refused by the breaker: nothing marked or deleted, and the upload sweep is paused until a person resumes it",
		"pass", p.cur.Pass, "term", p.term.N, "refused", refused)
	compared, _ := json.Marshal(p.cur.Breaker) // plain data always marshals
	p.pause = &etcdstore.Pause{Sweep: PauseUploads, Reason: refused, Compared: compared,
		Pass: p.cur.Pass, Term: p.term.N, At: r.now().UTC()}
	return refused, nil
}

// Pauses reads the sweeps' pauses, in the order of pauseSweeps (then any
// other name), and sets the paused gauge from them.
func (r *Reclaimer) Pauses(ctx context.Context) ([]etcdstore.Pause, error) {
	all, err := r.store.GetPauses(ctx)
	if err != nil {
		return nil, fmt.Errorf("reclaim: %w", err)
	}
	out := make([]etcdstore.Pause, 0, len(all))
	for _, sw := range pauseSweeps {
		if v, ok := all[sw]; ok {
			out = append(out, v.Value)
		}
	}
	for sw, v := range all {
		if !slices.Contains(pauseSweeps, sw) {
			out = append(out, v.Value)
		}
	}
	for _, sw := range pauseSweeps {
		_, ok := all[sw]
		r.metrics.setPaused(sw, ok)
	}
	return out, nil
}

// Resumed is what Resume did about one sweep.
type Resumed struct {
	Sweep string `json:"sweep"`
	// Lifted is the pause removed; nil when the sweep was not paused.
	Lifted *etcdstore.Pause `json:"lifted,omitempty"`
}

// ErrUnknownSweep says a resume named a sweep that does not exist.
var ErrUnknownSweep = errors.New("reclaim: no such sweep: the sweeps are uploads and digests")

// Resume lifts the pauses of sweeps (both when none is named), on behalf
// of principal. Each pause is removed only as it was read, so a pause
// written meanwhile by a new refusal stays; the removal writes an audit
// line naming the principal and the pause lifted. A sweep that is not
// paused is reported as such and nothing is written. Any process may
// resume: the pause is in etcd, and the next pass of the leader reads it.
func (r *Reclaimer) Resume(ctx context.Context, principal string, sweeps ...string) ([]Resumed, error) {
	if len(sweeps) == 0 {
		sweeps = pauseSweeps
	}
	for _, sw := range sweeps {
		if !slices.Contains(pauseSweeps, sw) {
			return nil, fmt.Errorf("%w (got %q)", ErrUnknownSweep, sw)
		}
	}
	out := make([]Resumed, 0, len(sweeps))
	for _, sw := range sweeps {
		res, err := r.resume(ctx, principal, sw)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

// resume lifts one sweep's pause, if it has one.
func (r *Reclaimer) resume(ctx context.Context, principal, sw string) (Resumed, error) {
	cur, err := r.store.GetPause(ctx, sw)
	if errors.Is(err, etcdstore.ErrNotFound) {
		r.metrics.setPaused(sw, false)
		return Resumed{Sweep: sw}, nil
	}
	if err != nil {
		return Resumed{Sweep: sw}, fmt.Errorf("reclaim: %w", err)
	}
	key := r.keys().Pause(sw)
	resp, err := r.cli().Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.ModRev)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return Resumed{Sweep: sw}, fmt.Errorf("reclaim: lift the pause of the %s sweep: %w", sw, err)
	}
	if !resp.Succeeded {
		return Resumed{Sweep: sw}, fmt.Errorf("reclaim: the pause of the %s sweep changed while it was lifted (a pass refused a plan again): read it and resume again", sw)
	}
	r.metrics.setPaused(sw, false)
	pz := cur.Value
	audit.Record(r.log, audit.ResumeSweep, sw, "a person resumed the sweep that the breaker paused",
		"principal", principal, "paused_pass", pz.Pass, "paused_term", pz.Term, "paused_at", pz.At, "paused_reason", pz.Reason)
	return Resumed{Sweep: sw, Lifted: &pz}, nil
}
