package etcdstore

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// gatewayVersion is the version of the GatewayClock layout.
const gatewayVersion = 1

// GatewayClock is the value of a gateway's Keys.Gateway record: the
// process's wall clock at the write, refreshed every Refresh while the
// process runs, so that the reclaimer can compare it with its own.
type GatewayClock struct {
	Version int    `json:"v"`
	ID      string `json:"id"`
	Host    string `json:"host"`
	Listen  string `json:"listen,omitempty"`
	// At is the process's wall clock when it wrote the record.
	At time.Time `json:"at"`
	// Refresh is how often the record is rewritten: a record read at any
	// moment was written at most Refresh (and the write's own latency) ago.
	Refresh time.Duration `json:"refresh"`
	// Layout is the fingerprint of the process's content-addressed layout
	// (cas.Layout.Fingerprint), "" when digest reclamation is off. The
	// digest sweep deletes nothing while two live processes differ.
	Layout string `json:"layout"`
	// Layouts is set by a process that publishes its layout; a record
	// without it is from a version that does not, whose layout is unknown.
	Layouts bool `json:"layouts,omitempty"`
	// Release is the process's sweepgate version; Schema and SchemaMin the
	// keyspace schemas it writes and the oldest it reads. A record without
	// Schema is from a build before they were published, which reads
	// schema 1 only.
	Release   string `json:"release,omitempty"`
	Schema    int    `json:"schema,omitempty"`
	SchemaMin int    `json:"schema_min,omitempty"`
}

// Reads reports whether the process that published g reads keyspace
// schema n.
func (g GatewayClock) Reads(n int) bool {
	if g.Schema == 0 {
		return n == 1
	}
	return max(g.SchemaMin, 1) <= n && n <= g.Schema
}

// ElapsedClock is the value of Keys.ElapsedClock: time measured by the
// reclaimer's leaders on their monotonic clocks, added up over their passes.
// Only time one process measured between two of its own pass starts is
// added, so no wall clock, and no time across a change of process, ever
// advances it.
type ElapsedClock struct {
	Version int `json:"v"`
	// Elapsed is the measured time, added up.
	Elapsed time.Duration `json:"elapsed"`
	// Term and Process say who last advanced (or took over) the clock;
	// Process is unique to one run of one process.
	Term    int64  `json:"term"`
	Process string `json:"process"`
	// At is that process's wall clock at the write, for the operator.
	At time.Time `json:"at"`
}

// Gateways reads the records every live gateway publishes with its clock
// (each under its own lease, so a gateway that stopped has none). A record
// this binary cannot read is an error: who wrote it is unknown.
func (s *Store) Gateways(ctx context.Context) ([]GatewayClock, error) {
	resp, err := s.cli.Get(ctx, s.keys.Gateways(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read the gateways' records: %w", err)
	}
	out := make([]GatewayClock, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var g GatewayClock
		if err := DecodeKV(GatewayRecord, kv, &g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}
