//go:build chaos

package chaos

import (
	crand "crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The reclaimer's settings in a campaign: grace periods of seconds, so that
// cleanup races the workload all the time.
const (
	grace          = 6 * time.Second
	deleteAfter    = 2 * time.Second
	passInterval   = time.Second
	electionTTL    = 2 * time.Second
	placementGrace = 2 * time.Second
	trashWindow    = 3 * time.Second
	backendTimeout = 5 * time.Second
	// clockSkew is reclaim.clock_skew: how far the clocks of the
	// reclaimer, the gateways and the backend may differ before a pass
	// stops. The campaign's clock faults offset a gateway by less (up to
	// 800ms) or by much more (minutes to days).
	clockSkew = 2 * time.Second
	// guardSettle is digests.guard_settle: just above backend_timeout and
	// election_ttl together, the least the setting allows, so that guards
	// kept for a late delete settle within the campaign.
	guardSettle = 8 * time.Second
	// reclaimable is how long an upload must go without activity before
	// the reclaimer may delete it: marked after grace, deleted after
	// delete_after more. An upload that had activity more recently must
	// never answer NoSuchUpload.
	reclaimable = grace + deleteAfter
)

// The campaign's defaults.
const (
	defaultDuration = 60 * time.Second
	defaultClients  = 6
)

// Test flags; CHAOS_SEED, CHAOS_DURATION and CHAOS_CLIENTS set the same
// and win over the flags' defaults, the flags over them.
var (
	flagSeed     = flag.String("chaos.seed", "", "campaign seed (default $CHAOS_SEED, else random)")
	flagDuration = flag.Duration("chaos.duration", 0, "workload duration (default $CHAOS_DURATION, else 60s)")
	flagClients  = flag.Int("chaos.clients", 0, "concurrent clients (default $CHAOS_CLIENTS, else 6)")
)

// campaignConfig is what one campaign runs with.
type campaignConfig struct {
	seed     uint64
	duration time.Duration
	clients  int
}

// reproduce is the command that runs the campaign again.
func (c campaignConfig) reproduce() string {
	return fmt.Sprintf("CHAOS_SEED=%d CHAOS_DURATION=%s CHAOS_CLIENTS=%d make chaos", c.seed, c.duration, c.clients)
}

// rng returns a generator for one stream of the campaign's randomness:
// every goroutine that draws gets its own stream, so what one draws does
// not depend on how the others were scheduled.
func (c campaignConfig) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(c.seed, stream*0x9e3779b97f4a7c15+1))
}

func loadConfig(t *testing.T) campaignConfig {
	t.Helper()
	c := campaignConfig{duration: defaultDuration, clients: defaultClients}
	seed := *flagSeed
	if seed == "" {
		seed = os.Getenv("CHAOS_SEED")
	}
	if seed != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(seed), 10, 64)
		if err != nil {
			t.Fatalf("chaos: seed %q is not a number", seed)
		}
		c.seed = n
	} else {
		var b [8]byte
		if _, err := crand.Read(b[:]); err != nil {
			t.Fatalf("chaos: random seed: %v", err)
		}
		// Short enough to type.
		c.seed = binary.LittleEndian.Uint64(b[:]) % 1_000_000_000
	}
	if *flagDuration > 0 {
		c.duration = *flagDuration
	} else if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("chaos: CHAOS_DURATION %q: want a duration of at least 10s", v)
		}
		c.duration = d
	}
	if *flagClients > 0 {
		c.clients = *flagClients
	} else if v := os.Getenv("CHAOS_CLIENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			t.Fatalf("chaos: CHAOS_CLIENTS %q: want 1 to 64", v)
		}
		c.clients = n
	}
	return c
}

// campaignLog is the campaign's record: every operation and its outcome,
// every fault and every verdict, one line each with its time and the time
// since the campaign started. The seed is on the first line.
type campaignLog struct {
	path  string
	start time.Time

	mu sync.Mutex
	f  *os.File
}

// openLog creates the log under SWEEPGATE_TEST_ARTIFACTS, or in the
// test's temporary directory (then it is copied next to the system's
// temporary files if the campaign fails, so that it outlives the test).
func openLog(t *testing.T, c campaignConfig) *campaignLog {
	t.Helper()
	dir := os.Getenv("SWEEPGATE_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("chaos-%d.log", c.seed))
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	l := &campaignLog{path: path, start: time.Now(), f: f}
	fmt.Fprintf(f, "seed=%d duration=%s clients=%d started=%s reproduce: %s\n",
		c.seed, c.duration, c.clients, l.start.UTC().Format(time.RFC3339Nano), c.reproduce())
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.f.Close()
		if t.Failed() && os.Getenv("SWEEPGATE_TEST_ARTIFACTS") == "" {
			kept := filepath.Join(os.TempDir(), filepath.Base(path))
			if b, err := os.ReadFile(path); err == nil && os.WriteFile(kept, b, 0o644) == nil {
				t.Logf("chaos: campaign log kept at %s", kept)
			}
		}
	})
	return l
}

// printf writes one line: time, seconds since the start, kind, message.
func (l *campaignLog) printf(kind, format string, args ...any) {
	now := time.Now()
	line := fmt.Sprintf("%s +%8.3fs %-8s %s\n", now.UTC().Format("15:04:05.000000"), now.Sub(l.start).Seconds(), kind, fmt.Sprintf(format, args...))
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.WriteString(line)
}

// since formats the time from the campaign's start to at.
func (l *campaignLog) since(at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return fmt.Sprintf("+%.3fs", at.Sub(l.start).Seconds())
}
