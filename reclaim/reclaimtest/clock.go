//go:build integration

// Package reclaimtest is the world the reclaimer's integration tests and
// the digest sweep's run in: a real MinIO (e2e/harness), a real embedded
// etcd (etcdstore/etcdtest), the session service over them, and an
// injected clock that moves only when a test says so (Env); and, for the
// digest sweep, a content-addressed bucket with its layout, blobs and
// manifests (DigestEnv). Package reclaim's tests and package
// digestsweep's use it, each for the half of reclamation it tests.
//
// Every file carries the build tag integration, as the tests that use it
// do: `go test ./...` without tags builds none of it and starts nothing.
package reclaimtest

import (
	"sync"
	"time"
)

// Clock is the injected clock of the test's world, wall and monotonic:
// time moves only when a test says so. Advance is time passing (both
// move); Jump moves the wall clock alone, as a clock set wrong does.
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	mono time.Duration
}

// backendLag is how far the test clock starts ahead of MinIO's. A test
// writes its parts on MinIO while setting the scene and records activity in
// the past of the test clock; starting ahead keeps those parts older than
// any recorded activity, as they would be had the scene been played out in
// time, instead of reading as activity around the gateway. Tests of that
// rule start from the backend's clock (Sync).
const backendLag = 72 * time.Hour

func newClock() *Clock {
	return &Clock{now: time.Now().UTC().Truncate(time.Second).Add(backendLag)}
}

// Sync sets the clock to MinIO's (the machine's) time.
func (c *Clock) Sync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = time.Now().UTC()
}

// Now is the wall clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance is d passing: both clocks move by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.mono += d
}

// Jump moves the wall clock by d and not the monotonic one.
func (c *Clock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set sets the wall clock to t; a move forward is time passing, so the
// monotonic clock moves by as much (a move back leaves it).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.mono += t.Sub(c.now)
	}
	c.now = t
}

// Mono is the monotonic clock: the time passed since the test began.
func (c *Clock) Mono() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// Timers is a multipart.Config.AfterFunc (After) whose functions run
// when the test fires them, so that no test waits for time to pass.
type Timers struct {
	mu      sync.Mutex
	pending []*timer
}

type timer struct {
	f       func()
	stopped bool
}

// After schedules f; the function it returns stops it, reporting
// whether it was pending.
func (m *Timers) After(_ time.Duration, f func()) func() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &timer{f: f}
	m.pending = append(m.pending, t)
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Fire runs the functions scheduled and not stopped, and returns how many
// ran.
func (m *Timers) Fire() int {
	m.mu.Lock()
	var run []func()
	for _, t := range m.pending {
		if !t.stopped {
			t.stopped = true
			run = append(run, t.f)
		}
	}
	m.pending = nil
	m.mu.Unlock()
	for _, f := range run {
		f()
	}
	return len(run)
}
