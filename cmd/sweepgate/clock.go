package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sweepgate/sweepgate/reclaim"
)

// clockOffsetEnv names the test hook that shifts this process's wall clock
// by a duration (as time.ParseDuration reads it, "-72h", "10m"), so that a
// test can run one process with a wrong clock. It shifts the one clock
// serve injects into every part: the gateway's stamps and signatures, the
// reclaimer, the published clock, the admin API. It does not shift the
// monotonic measure of the reclaimer's elapsed clock, as a wrong wall clock
// does not. It is an environment variable, not a setting: nobody should
// set it by accident.
const clockOffsetEnv = "SWEEPGATE_TEST_CLOCK_OFFSET"

// serveClock returns the clock of this process: the wall clock, shifted by
// clockOffsetEnv when it is set.
func serveClock(logger *slog.Logger) (func() time.Time, error) {
	v := os.Getenv(clockOffsetEnv)
	if v == "" {
		return time.Now, nil
	}
	off, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", clockOffsetEnv, err)
	}
	logger.Warn("test clock hook armed: this process's wall clock is shifted", "offset", off.String())
	return func() time.Time { return time.Now().Add(off) }, nil
}

// publishClock publishes this process's clock with its liveness in etcd
// (reclaim.PublishClock), in every shard, whose reclaimer reads it there,
// until the returned stop is called, which removes the records and may be
// called more than once. Without a store (sessions off) there is nothing
// to publish to and no reclaimer to read it.
func (s *server) publishClock() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var dones []<-chan struct{}
	for _, sh := range s.shards {
		logger := s.logger.With("component", "clock")
		if s.cfg.Sharded() {
			logger = logger.With("shard", sh.name)
		}
		dones = append(dones, reclaim.PublishClock(ctx, reclaim.PublishConfig{
			Store: sh.store, ID: s.rec.info.ID, Listen: s.addrs.S3, Layout: s.layout.Fingerprint(), Release: s.build.Version,
			Now: s.clock, Logger: logger,
		}))
	}
	return func() {
		cancel()
		for _, done := range dones {
			<-done
		}
	}
}
