//go:build integration

package main

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cmd/sweepgate/cli"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// TestServeClockOffset runs serve with SWEEPGATE_TEST_CLOCK_OFFSET: the
// clock it publishes in etcd, under its reclaimer id, is shifted by the
// offset, and a clean shutdown removes the record. (Not parallel: it sets
// the process's environment.)
func TestServeClockOffset(t *testing.T) {
	t.Setenv(clockOffsetEnv, "-1h")
	etcd, ec := etcdtest.Start(t)
	b := newBackend(t)
	s := startServe(t, append(baseArgs(t, b), "--etcd-endpoints="+strings.Join(etcd.Endpoints(), ","))...)
	keys := etcdstore.Keys{}
	var g etcdstore.GatewayClock
	waitUntil(t, "the published clock", 20*time.Second, func() bool {
		resp, err := ec.Get(t.Context(), keys.Gateways(), clientv3.WithPrefix())
		return err == nil && len(resp.Kvs) == 1 && json.Unmarshal(resp.Kvs[0].Value, &g) == nil
	})
	if off := time.Until(g.At); off > -time.Hour+10*time.Second || off < -time.Hour-10*time.Second {
		t.Errorf("published clock %s is %s from now, want about -1h", g.At, off)
	}
	if !strings.HasSuffix(g.ID, "@"+s.addrs.Admin) || g.Listen != s.addrs.S3 || g.Refresh <= 0 {
		t.Errorf("published record %+v, want the reclaimer id, the S3 address and the refresh", g)
	}
	if !strings.Contains(s.logs.String(), "test clock hook armed") {
		t.Error("serve did not log the armed clock hook")
	}
	if code := s.stop(t); code != cli.ExitOK {
		t.Fatalf("serve exited %d", code)
	}
	resp, err := ec.Get(t.Context(), keys.Gateways(), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("after a clean shutdown %d published clocks are left (%v)", len(resp.Kvs), err)
	}
}

// TestServeClockOffsetRefusesBadValue checks that a malformed offset stops
// serve from starting instead of running with some clock.
func TestServeClockOffsetRefusesBadValue(t *testing.T) {
	t.Setenv(clockOffsetEnv, "an hour ago")
	if _, err := serveClock(slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), clockOffsetEnv) {
		t.Errorf("serveClock with a malformed offset = %v, want an error naming %s", err, clockOffsetEnv)
	}
}
