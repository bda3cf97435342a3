//go:build integration

package admin

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// TestReclaimResumeAPI shows a pause in the reclaim status, lifts it on a
// gateway that does not lead (the pause is in etcd), and answers a resume
// of a sweep that is not paused as a no-op, not an error.
func TestReclaimResumeAPI(t *testing.T) {
	t.Parallel()
	e := newReclaimEnv(t)
	follower := serveWithReclaimer(t, e.Store, e.Reclaimer("follower@test"), ReclaimerInfo{ID: "follower@test"})
	api := follower + "/admin/v1/reclaim"
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pause := etcdstore.Pause{Sweep: "uploads", Reason: "plan deletes 9 of 10 stored uploads", Compared: []byte(`{"delete_uploads":9}`), Pass: 7, Term: 3, At: at}
	if _, err := e.Store.Client().Do(t.Context(), e.Store.Keys().PauseOp(pause)); err != nil {
		t.Fatal(err)
	}

	var st adminapi.ReclaimStatus
	if code := call(t, http.MethodGet, api+"/status", "", "", &st); code != http.StatusOK || len(st.Paused) != 1 {
		t.Fatalf("status = %d, paused %+v; want the uploads pause", code, st.Paused)
	}
	if p := st.Paused[0]; p.Sweep != "uploads" || p.Pass != 7 || p.Term != 3 || !p.At.Equal(at) || p.Reason != pause.Reason || !strings.Contains(string(p.Compared), `"delete_uploads": 9`) {
		t.Errorf("status pause = %+v", p)
	}

	var res adminapi.Resumed
	if code := postJSON(t, api+"/resume", `{"sweeps": ["uploads"], "principal": "alice"}`, &res); code != http.StatusOK ||
		len(res.Results) != 1 || !res.Results[0].Resumed || res.Results[0].Lifted == nil || res.Results[0].Lifted.Pass != 7 {
		t.Fatalf("resume = %d %+v", code, res)
	}
	if code := call(t, http.MethodGet, api+"/status", "", "", &st); code != http.StatusOK || st.Paused == nil || len(st.Paused) != 0 {
		t.Errorf("status after the resume = %d, paused %+v; want []", code, st.Paused)
	}
	// Both sweeps, neither paused: a clear no-op.
	res = adminapi.Resumed{}
	if code := postJSON(t, api+"/resume", `{"principal": "alice"}`, &res); code != http.StatusOK || len(res.Results) != 2 ||
		res.Results[0].Resumed || res.Results[1].Resumed || !strings.Contains(res.Results[1].Message, "digests sweep is not paused") {
		t.Errorf("resume of nothing = %d %+v", code, res)
	}
	for _, tt := range []struct{ body, want string }{
		{`{"sweeps": ["uploads"]}`, "principal"},
		{`{"sweeps": ["orphans"], "principal": "alice"}`, "uploads and digests"},
	} {
		var apiErr adminapi.ErrorBody
		if code := postJSON(t, api+"/resume", tt.body, &apiErr); code != http.StatusBadRequest || apiErr.Error.Code != adminapi.CodeBadRequest || !strings.Contains(apiErr.Error.Message, tt.want) {
			t.Errorf("resume %s = %d %+v", tt.body, code, apiErr)
		}
	}
	if code := call(t, http.MethodGet, api+"/resume", "", "", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET resume = %d, want 405", code)
	}
}
