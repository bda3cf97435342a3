package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Pauses returns the prefix of the sweeps' pause records.
func (k Keys) Pauses() string {
	return k.Reclaim() + "paused/"
}

// Pause returns the key of one sweep's pause record ("uploads",
// "digests"). While it exists the sweep plans and reports but marks and
// deletes nothing; only a person removes it.
func (k Keys) Pause(sweep string) string {
	return k.Pauses() + url.PathEscape(sweep)
}

// pauseVersion is the version of the Pause layout.
const pauseVersion = 1

// Pause records that a sweep's breaker refused a plan and paused the
// sweep: why, the numbers it compared (the sweep's breaker section, as
// JSON), and the pass, term and time of the refusal.
type Pause struct {
	Version int    `json:"v"`
	Sweep   string `json:"sweep"`
	Reason  string `json:"reason"`
	// Compared is the breaker section of the refused pass's report.
	Compared json.RawMessage `json:"compared,omitempty"`
	Pass     int64           `json:"pass"`
	Term     int64           `json:"term"`
	At       time.Time       `json:"at"`
}

// MarshalPause encodes p with its version set.
func MarshalPause(p Pause) string {
	p.Version = pauseVersion
	b, _ := json.Marshal(p) // plain data always marshals
	return string(b)
}

// GetPauses reads every sweep's pause record, by sweep, with their mod
// revisions. A record that does not decode still pauses its sweep: it is
// returned with its reason saying so.
func (s *Store) GetPauses(ctx context.Context) (map[string]Versioned[Pause], error) {
	resp, err := s.cli.Get(ctx, s.keys.Pauses(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read pause records: %w", err)
	}
	out := make(map[string]Versioned[Pause], len(resp.Kvs))
	for _, kv := range resp.Kvs {
		esc := strings.TrimPrefix(string(kv.Key), s.keys.Pauses())
		sweep, err := url.PathUnescape(esc)
		if err != nil {
			sweep = esc
		}
		var p Pause
		if err := DecodeKV(PauseRecord, kv, &p); err != nil {
			p = Pause{Reason: fmt.Sprintf("a pause record that does not decode (%v)", err)}
		}
		p.Sweep = sweep
		out[sweep] = Versioned[Pause]{Value: p, ModRev: kv.ModRevision}
	}
	return out, nil
}

// GetPause reads one sweep's pause record; ErrNotFound when the sweep is
// not paused. A record that does not decode still pauses its sweep.
func (s *Store) GetPause(ctx context.Context, sweep string) (Versioned[Pause], error) {
	resp, err := s.cli.Get(ctx, s.keys.Pause(sweep))
	if err != nil {
		return Versioned[Pause]{}, fmt.Errorf("read pause record: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Versioned[Pause]{}, ErrNotFound
	}
	var p Pause
	if err := DecodeKV(PauseRecord, resp.Kvs[0], &p); err != nil {
		p = Pause{Reason: fmt.Sprintf("a pause record that does not decode (%v)", err)}
	}
	p.Sweep = sweep
	return Versioned[Pause]{Value: p, ModRev: resp.Kvs[0].ModRevision}, nil
}

// PauseOp is the write that pauses p.Sweep with p.
func (k Keys) PauseOp(p Pause) clientv3.Op {
	return clientv3.OpPut(k.Pause(p.Sweep), MarshalPause(p))
}
