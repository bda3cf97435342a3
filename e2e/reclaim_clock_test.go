//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/reclaim"
)

// TestReclaimClockOfAGatewayBehind runs a second gateway whose clock is
// ten minutes behind (SWEEPGATE_TEST_CLOCK_OFFSET; more than the clock
// skew allowance, less than the signature skew MinIO allows) next to the
// leader: while it runs, every pass stops on the clock check, names it and
// marks nothing, although an abandoned upload is past the grace. Once it
// stops cleanly (its published clock goes with it), passes mark the upload
// and then delete it.
func TestReclaimClockOfAGatewayBehind(t *testing.T) {
	t.Parallel()
	if harness.DirectMode() {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"reclaim": map[string]any{"grace": reclaimGrace.String(), "delete_after": "1s", "interval": "1h",
			"max_delete_fraction": 1, "max_delete_uploads_fraction": 1, "max_mark_fraction": 1},
	}})
	e.RequireGateway(t)
	admin := e.Gateway.AdminEndpoint
	awaitLeading(t, e.Gateway)
	sdk, direct := e.SDK(t), e.DirectSDK(t)
	store := newSessionStore(t, e)
	bucket := e.Bucket(t)

	const key = "abandoned/a.bin"
	id := createUpload(t, sdk, bucket, key)
	mustUploadPart(t, sdk, bucket, key, id, 1, smallPart())
	abandonedAt := time.Now()

	late := harness.StartGateway(t, e.MinIO, harness.Options{
		EtcdEndpoints: []string{e.Gateway.EtcdClientURL},
		Env:           []string{"SWEEPGATE_TEST_CLOCK_OFFSET=-10m"},
		Config:        map[string]any{"reclaim": map[string]any{"enabled": false}},
	})
	lateID := "@" + strings.TrimPrefix(late.AdminEndpoint, "http://")

	time.Sleep(time.Until(abandonedAt.Add(reclaimGrace + 200*time.Millisecond)))
	for range 2 {
		code, out, errOut := sweepgateCmd(t, admin, append([]string{"reclaim", "run", "--json"}, shardFlags(e.Gateway, bucket)...)...)
		var rep reclaim.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code == 0 {
			t.Fatalf("reclaim run with a late gateway: exit %d, %v\n%s\n%s", code, err, out, errOut)
		}
		if !strings.Contains(rep.Stopped, "clock skew") || !strings.Contains(rep.Stopped, lateID) || !strings.Contains(rep.Stopped, "behind") ||
			rep.Acted != (reclaim.Acted{}) {
			t.Fatalf("pass %d with a late gateway: stopped %q, acted %+v", rep.Pass, rep.Stopped, rep.Acted)
		}
	}
	store.requireState(t, bucket, id, "active")
	if got := backendPartNumbers(t, direct, bucket, key, id); len(got) != 1 {
		t.Fatalf("MinIO holds parts %v of the abandoned upload, want its one part", got)
	}
	metrics, _ := readMetrics(t, e.Gateway)
	if stops, _ := metrics.series("sweepgate_reclaim_clock_skew_stops_total", append([]string{"clock", "gateway"}, shardLabel(e.Gateway, bucket)...)...); stops != 2 {
		t.Errorf("clock skew stops counted %v times, want 2", stops)
	}

	late.Stop()
	var rep reclaim.Report
	eventually(t, 30*time.Second, func() (bool, string) {
		time.Sleep(200 * time.Millisecond)
		rep = runPass(t, admin, shardFlags(e.Gateway, bucket)...)
		return rep.Acted.Deleted.Sessions == 1, fmt.Sprintf("pass %d: stopped %q, marked %+v, deleted %+v", rep.Pass, rep.Stopped, rep.Acted.Marked, rep.Acted.Deleted)
	})
	requireUploadGone(t, direct, bucket, key, id)
}
