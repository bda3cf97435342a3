package reclaim

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// DefaultClockRefresh is how often a gateway rewrites its published clock.
// The leader allows a record one refresh of age, so this bounds how far
// beyond reclaim.clock_skew a gateway behind can go unseen.
const DefaultClockRefresh = time.Second

// PublishConfig is what PublishClock needs.
type PublishConfig struct {
	Store *etcdstore.Store
	// ID names the process; Listen is its S3 address, for the operator.
	ID, Listen string
	// Refresh is how often the record is rewritten; zero means
	// DefaultClockRefresh.
	Refresh time.Duration
	// Layout is the fingerprint of the process's content-addressed layout
	// (cas.Layout.Fingerprint), published with the clock.
	Layout string
	// Release is the process's sweepgate version, published with the
	// keyspace schemas it reads and writes (etcdstore.SchemaVersion,
	// etcdstore.MinSchemaVersion).
	Release string
	// Now is the process's clock, the one its records are stamped with.
	Now    func() time.Time
	Logger *slog.Logger
}

// PublishClock publishes the process's clock with its liveness until ctx
// ends: a record under a lease of gatewayLeaseRefreshes refreshes, written
// at once and every Refresh, so that it stands only while the process runs.
// When ctx ends the lease is revoked, removing the record. Failures are
// logged and retried at the next refresh; the returned channel is closed
// once the record is removed (or could not be).
func PublishClock(ctx context.Context, cfg PublishConfig) <-chan struct{} {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultClockRefresh
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pub := &publisher{cfg: cfg, cli: cfg.Store.Client(), key: cfg.Store.Keys().Gateway(cfg.ID)}
		pub.run(ctx)
	}()
	return done
}

type publisher struct {
	cfg   PublishConfig
	cli   *clientv3.Client
	key   string
	lease clientv3.LeaseID
}

func (p *publisher) run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Refresh)
	defer t.Stop()
	for {
		if err := p.publish(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("gateway clock not published; trying again", "err", err, "in", p.cfg.Refresh.String())
		}
		select {
		case <-ctx.Done():
			p.remove()
			return
		case <-t.C:
		}
	}
}

// publish writes the record under the lease, granting a new lease when
// there is none or it expired.
func (p *publisher) publish(ctx context.Context) error {
	host, _ := os.Hostname()
	rec := etcdstore.GatewayClock{Version: etcdstore.GatewayRecord.Version, ID: p.cfg.ID, Host: host, Listen: p.cfg.Listen, At: p.cfg.Now().UTC(), Refresh: p.cfg.Refresh, Layout: p.cfg.Layout, Layouts: true,
		Release: p.cfg.Release, Schema: etcdstore.SchemaVersion, SchemaMin: etcdstore.MinSchemaVersion}
	val, err := json.Marshal(&rec)
	if err != nil {
		return err
	}
	if p.lease != 0 {
		if _, err := p.cli.KeepAliveOnce(ctx, p.lease); err != nil {
			p.lease = 0
		}
	}
	if p.lease == 0 {
		ttl := int64((gatewayLeaseRefreshes * p.cfg.Refresh).Round(time.Second) / time.Second)
		g, err := p.cli.Grant(ctx, max(ttl, 2))
		if err != nil {
			return err
		}
		p.lease = g.ID
	}
	_, err = p.cli.Put(ctx, p.key, string(val), clientv3.WithLease(p.lease))
	return err
}

// remove revokes the lease, which removes the record.
func (p *publisher) remove() {
	if p.lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.cli.Revoke(ctx, p.lease); err != nil && !errors.Is(err, context.Canceled) {
		p.cfg.Logger.Warn("gateway clock record not removed; its lease expires on its own", "err", err)
	}
}
