//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/reclaim"
)

// The reclaim tests drive the reclaimer of the real sweepgate binary the
// way an operator does: through `sweepgate reclaim` (the same binary, as a
// client of the admin API) and the admin API itself, with real time and
// short grace periods, and look at MinIO directly for what was deleted.

// reclaimCLITimeout bounds one `sweepgate reclaim` call.
const reclaimCLITimeout = time.Minute

// sweepgateCmd runs the sweepgate binary as a command-line client against
// admin and returns its exit code and output. The environment has none of
// the caller's SWEEPGATE_ variables, so only --admin says where to go; it
// has the admin token of the harness gateway there.
func sweepgateCmd(t *testing.T, admin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runSweepgate(t, adminTokenEnv(admin), append(args, "--admin", admin)...)
}

// runSweepgate runs the sweepgate binary with the caller's environment
// less every SWEEPGATE_ variable, plus env, and returns its exit code and
// output.
func runSweepgate(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), reclaimCLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.BuildSweepgate(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWEEPGATE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("sweepgate %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

// mustSweepgate runs the client and fails the test unless it exits with
// want.
func mustSweepgate(t *testing.T, want int, admin string, args ...string) string {
	t.Helper()
	code, out, errOut := sweepgateCmd(t, admin, args...)
	if code != want {
		t.Fatalf("sweepgate %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out
}

// runPass runs one pass with `sweepgate reclaim run --json` and returns its
// report; flags are added to the command (shardFlags).
func runPass(t *testing.T, admin string, flags ...string) reclaim.Report {
	t.Helper()
	out := mustSweepgate(t, 0, admin, append([]string{"reclaim", "run", "--json"}, flags...)...)
	var rep reclaim.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reclaim run --json: %v\n%s", err, out)
	}
	return rep
}

// reclaimStatus is what the tests read of GET /admin/v1/reclaim/status.
type reclaimStatus struct {
	Pass      int64 `json:"pass"`
	Reclaimer struct {
		ID      string              `json:"id"`
		Enabled bool                `json:"enabled"`
		Leading bool                `json:"leading"`
		Term    int64               `json:"term"`
		Leader  *reclaim.LeaderInfo `json:"leader"`
	} `json:"reclaimer"`
}

// shardFlags are the flags that send a sweepgate command to the shard
// that keeps bucket's state in shard mode (SWEEPGATE_E2E_SHARDS); none
// otherwise.
func shardFlags(g *harness.Gateway, bucket string) []string {
	if name := g.ShardOf(bucket); name != "" {
		return []string{"--shard", name}
	}
	return nil
}

// shardLabel is the label of the series of the shard that keeps bucket's
// state in shard mode; none otherwise.
func shardLabel(g *harness.Gateway, bucket string) []string {
	if name := g.ShardOf(bucket); name != "" {
		return []string{"shard", name}
	}
	return nil
}

// adminStatus reads a gateway's reclaimer status from its admin API (the
// default shard's in shard mode); ok is false when the gateway does not
// answer (it is down).
func adminStatus(t *testing.T, g *harness.Gateway) (st reclaimStatus, ok bool) {
	t.Helper()
	return adminShardStatus(t, g, "")
}

// adminShardStatus is adminStatus of the reclaimer of shard (none: the
// default).
func adminShardStatus(t *testing.T, g *harness.Gateway, shard string) (st reclaimStatus, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	u := g.AdminEndpoint + "/admin/v1/reclaim/status"
	if shard != "" {
		u += "?shard=" + shard
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	authorizeAdmin(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reclaim status of %s: %s %s", g.AdminEndpoint, resp.Status, body)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("reclaim status of %s: %v\n%s", g.AdminEndpoint, err, body)
	}
	return st, true
}

// awaitLeading waits until g leads the reclaimer election, in shard mode
// every shard's, and returns its status (the default shard's).
func awaitLeading(t *testing.T, g *harness.Gateway) reclaimStatus {
	t.Helper()
	var st reclaimStatus
	eventually(t, 30*time.Second, func() (bool, string) {
		for _, shard := range g.ShardNames() {
			if st, _ := adminShardStatus(t, g, shard); !st.Reclaimer.Leading {
				return false, "the gateway does not lead the reclaimer election of shard " + shard
			}
		}
		st, _ = adminStatus(t, g)
		return st.Reclaimer.Leading, "the gateway does not lead the reclaimer election"
	})
	return st
}
