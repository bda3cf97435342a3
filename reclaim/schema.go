package reclaim

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// ErrSchema says the keyspace's schema is one that this binary, or a live
// gateway, does not read: a pass marks and deletes nothing until every
// process reads it. It is etcdstore.ErrSchema; the error is an
// *etcdstore.SchemaError.
var ErrSchema = etcdstore.ErrSchema

// schemaGate returns an *etcdstore.SchemaError unless this binary and every live
// gateway read the stored keyspace schema.
func schemaGate(stored int, gateways []etcdstore.GatewayClock) error {
	if err := etcdstore.ReadsSchema(stored); err != nil {
		return fmt.Errorf("reclaim: %w; nothing marked or deleted until every gateway reads it", err)
	}
	for _, g := range gateways {
		if !g.Reads(stored) {
			lo, hi := max(g.SchemaMin, 1), max(g.Schema, 1)
			err := &etcdstore.SchemaError{Stored: stored, Gateway: g.ID, Release: g.Release, Min: lo, Max: hi}
			return fmt.Errorf("reclaim: %w; nothing marked or deleted until every gateway reads it", err)
		}
	}
	return nil
}

// checkSchema reads the keyspace schema and every live gateway's published
// schemas, and stops the pass (counted, logged at error) unless all read
// it. It runs before anything of a pass is read or decided.
func (r *Reclaimer) checkSchema(ctx context.Context) error {
	stored, err := r.store.StoredSchema(ctx)
	if err != nil {
		return fmt.Errorf("reclaim: %w", err)
	}
	gateways, err := r.store.Gateways(ctx)
	if err != nil {
		return fmt.Errorf("reclaim: %w", err)
	}
	if err := schemaGate(stored, gateways); err != nil {
		r.schemaStops.Inc()
		r.log.Error("reclaim pass stopped: a process does not read the keyspace schema", "err", err)
		return err
	}
	return nil
}

func newSchemaStops(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sweepgate", Subsystem: "reclaim", Name: "schema_stops_total",
		Help: "Passes stopped because the keyspace schema stored in etcd is one that the reclaimer or a live gateway does not read."})
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}
