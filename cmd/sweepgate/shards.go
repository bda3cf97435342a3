package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/admin"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/shards"
)

// shardState is one store of state and what serve builds over it: the
// only one, named default, without etcd.shards; one per shard with them.
// Nothing is shared between shards but the backend, so that one shard's
// etcd failing leaves the others' requests and passes alone.
type shardState struct {
	name      string
	endpoints []string
	etcd      *clientv3.Client
	keys      etcdstore.Keys
	// store is for the background work; requestStore bounds each etcd
	// request by etcd.request_timeout, for the gateway.
	store        *etcdstore.Store
	requestStore *etcdstore.Store
	avail        *etcdstore.Availability
	schema       *etcdstore.SchemaCheck
	sessions     *multipart.Service
	digests      *digests.Service // nil unless the digest layout is on this shard
	// reg registers the shard's series: the process's registry, with a
	// shard label when there are shards.
	reg prometheus.Registerer
}

// stateHealth says whether requests that write state on the shard may go
// ahead: nil while its etcd answers in a keyspace schema this binary
// reads; the refusal of a schema it does not read is an S3 error of its
// own.
func (sh *shardState) stateHealth() error {
	if err := sh.avail.Err(); err != nil {
		return err
	}
	err := sh.schema.Err()
	var se *etcdstore.SchemaError
	switch {
	case errors.As(err, &se):
		return s3err.SchemaNotRead(se.Stored, se.Min, se.Max)
	case err != nil:
		return s3err.ErrStateTooNew
	}
	return nil
}

// openShard connects to one shard's etcd and opens its store. An etcd
// that does not answer does not stop the start (checkEtcd).
func (s *server) openShard(ctx context.Context, spec config.EtcdShard, endpoints []string) (*shardState, error) {
	cfg := s.cfg
	sh := &shardState{name: spec.Name, endpoints: endpoints, reg: s.reg}
	if cfg.Sharded() {
		sh.reg = prometheus.WrapRegistererWith(prometheus.Labels{"shard": spec.Name}, s.reg)
	}
	var creds etcdstore.Credentials
	if s.embedded == nil {
		// With shards etcd.endpoints is empty: the shard's own endpoints
		// say whether it is https, and etcd.* only fill its fields.
		read := cfg.EtcdCredentials
		if cfg.Sharded() {
			read = func() (etcdstore.Credentials, error) { return config.ShardCredentials(spec) }
		}
		c, err := read()
		if err != nil {
			return nil, err
		}
		creds = c
	}
	cli, err := s.etcdClient(endpoints, creds)
	if err != nil {
		return nil, fmt.Errorf("etcd shard %s: %w", spec.Name, err)
	}
	sh.etcd = cli
	s.closers = append(s.closers, func() { cli.Close() })
	sh.reg.MustRegister(etcdstore.NewStatusCollector(cli, endpoints))
	sh.avail = etcdstore.NewAvailability(cli, availabilityProbeInterval, cfg.Etcd.RequestTimeout, sh.reg)
	sh.keys, _ = etcdstore.NewKeys(spec.Prefix) // config validated the prefix
	if err := s.checkEtcd(ctx, sh); err != nil {
		return nil, err
	}
	// One store for everything that reads or writes the shard's records,
	// so that its etcd requests are timed in one histogram.
	sh.store = etcdstore.NewStore(cli, sh.keys).WithMetrics(sh.reg)
	sh.requestStore = sh.store.WithRequestTimeout(cfg.Etcd.RequestTimeout)
	logger := s.logger
	if cfg.Sharded() {
		logger = logger.With("shard", spec.Name)
	}
	sh.schema = etcdstore.NewSchemaCheck(sh.requestStore, func(err error) {
		if err != nil {
			logger.Error("the keyspace schema is not one this binary reads: requests that write state are refused", "err", err)
		} else {
			logger.Info("the keyspace schema is one this binary reads")
		}
	})
	if len(cfg.Digests.Planes) > 0 && spec.Name == cfg.LayoutShard() {
		sh.reg.MustRegister(digestsweep.NewPlaneCollector(sh.store, cfg.Digests.Planes, s.clock))
	}
	return sh, nil
}

// etcdClient returns the client of a shard's etcd: the embedded member's
// in process (it is the only shard then), else one over gRPC to
// endpoints; both traced when tracing is on.
func (s *server) etcdClient(endpoints []string, creds etcdstore.Credentials) (*clientv3.Client, error) {
	if s.embedded != nil {
		return s.embedded.Client(s.tracing.etcdKV()), nil
	}
	return etcdstore.Dial(endpoints, s.cfg.Etcd.DialTimeout, creds, s.logger, s.tracing.etcdDialOptions()...)
}

// openDirectory reads the shard directory from the default shard, which
// serve needs to start with shards, and refuses a configuration that
// contradicts it; then builds the router.
func (s *server) openDirectory(ctx context.Context) error {
	def := s.shards[0]
	s.dir = shards.NewDirectory(def.etcd, def.keys)
	lctx, cancel := context.WithTimeout(ctx, s.cfg.Etcd.DialTimeout)
	err := s.dir.Load(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("etcd.shards: the default shard %s must answer at start, for its shard directory: %w", def.name, err)
	}
	stores := make([]shards.Store, len(s.shards))
	for i, sh := range s.shards {
		stores[i] = shards.Store{Name: sh.name, Holds: func(ctx context.Context, bucket string) (bool, error) {
			ctx, cancel := context.WithTimeout(ctx, s.cfg.Etcd.RequestTimeout)
			defer cancel()
			return shards.HoldsState(ctx, sh.etcd, sh.keys, bucket)
		}}
	}
	configured := make(map[string]string)
	for _, spec := range s.cfg.Shards() {
		for _, b := range spec.Buckets {
			configured[b] = spec.Name
		}
	}
	if s.router, err = shards.NewRouter(stores, configured, s.dir, s.logger); err != nil {
		return err
	}
	if err := s.router.Check(s.dir.All()); err != nil {
		return fmt.Errorf("etcd.shards contradicts the shard directory, and no bucket is moved silently:\n%w", err)
	}
	return nil
}

// layoutStore is the store of the digest layout's shard: the default
// one's without shards or without a layout.
func (s *server) layoutStore() *etcdstore.Store {
	for _, sh := range s.shards {
		if sh.digests != nil {
			return sh.store
		}
	}
	return s.store
}

// gatewayShards are the shards as the gateway serves them.
func (s *server) gatewayShards() []gateway.Shard {
	out := make([]gateway.Shard, len(s.shards))
	for i, sh := range s.shards {
		out[i] = gateway.Shard{Name: sh.name, Sessions: sh.sessions, Digests: sh.digests, StateHealth: sh.stateHealth}
	}
	return out
}

// shardsState is /etcdz's view of every shard: it fails while any shard's
// etcd does not answer, naming the shards that do not.
type shardsState []*shardState

func (st shardsState) State() (since time.Time, err error) {
	var errs []error
	for _, sh := range st {
		t, e := sh.avail.State()
		if e == nil {
			continue
		}
		if since.IsZero() || t.Before(since) {
			since = t
		}
		errs = append(errs, fmt.Errorf("shard %s: %w", sh.name, e))
	}
	return since, errors.Join(errs...)
}

// newReclaimers builds a reclaimer per shard, each with its own election
// and fencing term in its own shard's etcd; the default shard's is s.rec,
// which publishes its progress to progress, and every other shard's
// publishes to a hub of its own, which the admin API streams from.
func (s *server) newReclaimers(progress *admin.ProgressHub, fault func(string)) error {
	if len(s.shards) == 0 {
		rec, err := newReclaimer(s.cfg, nil, s.backend, s.layout, s.logger, progress.Publish, fault, s.addrs.Admin, s.clock)
		s.rec, s.recs = rec, []serveReclaimer{rec}
		return err
	}
	for i, sh := range s.shards {
		hub := progress
		if i > 0 {
			hub = admin.NewProgressHub()
		}
		rec, err := newReclaimer(s.cfg, sh, s.backend, s.layout, s.logger, hub.Publish, fault, s.addrs.Admin, s.clock)
		if err != nil {
			return fmt.Errorf("shard %s: %w", sh.name, err)
		}
		rec.progress = hub
		s.recs = append(s.recs, rec)
	}
	s.rec = s.recs[0]
	return nil
}

// startReclaimers starts every shard's reclaimer (serveReclaimer.start)
// and returns the function that stops them all at once.
func (s *server) startReclaimers(ctx context.Context) (stop func()) {
	stops := make([]func(), len(s.recs))
	for i, rec := range s.recs {
		logger := s.logger
		if s.cfg.Sharded() {
			logger = logger.With("shard", s.shards[i].name)
		}
		stops[i] = rec.start(ctx, logger)
	}
	return func() {
		var wg sync.WaitGroup
		for _, stop := range stops {
			wg.Go(stop)
		}
		wg.Wait()
	}
}

// adminShards are the shards as the admin API serves them, each with its
// own store, reclaimer, progress hub and migrator; nil without
// etcd.shards.
func (s *server) adminShards() []admin.Shard {
	if !s.cfg.Sharded() {
		return nil
	}
	out := make([]admin.Shard, len(s.shards))
	for i, sh := range s.shards {
		rec := s.recs[i]
		out[i] = admin.Shard{Name: sh.name, Store: sh.store, Reclaimer: rec.r, ReclaimerInfo: rec.info,
			Progress: rec.progress, Migrator: s.migrator(sh.store)}
	}
	return out
}

// routeBucket names the shard that holds bucket's state, as the gateway
// routes it; the default shard without etcd.shards.
func (s *server) routeBucket(bucket string) string {
	if s.router == nil {
		return config.DefaultShard
	}
	return s.shards[s.router.Lookup(bucket)].name
}
