package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

const resumePath = "/admin/v1/reclaim/resume"

// reclaimResume lifts the breaker's pauses through the admin API.
func (c *Client) reclaimResume(ctx context.Context, args []string) int {
	const name = "reclaim resume"
	f, pos, code, ok := c.parseReclaimFlags(name, args, withSweeps|withPrincipal|withShard, 0)
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	if f.principal == "" {
		f.principal = envValue(c.Environ, "USER")
	}
	if f.principal == "" {
		return c.usageError(name, errors.New("--principal: who resumes is recorded in the audit log, and $USER is not set"))
	}
	req := adminapi.ResumeRequest{Sweeps: []string{}, Principal: f.principal}
	if f.uploads {
		req.Sweeps = append(req.Sweeps, "uploads")
	}
	if f.digests {
		req.Sweeps = append(req.Sweeps, "digests")
	}
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodPost, path: resumePath, body: req, timeout: adminClientTimeout})
	if code != ExitOK {
		return code
	}
	var ans adminapi.Resumed
	if status != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.Results == nil {
		return c.apiFailure(name, f.admin+resumePath, status, body)
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	for _, r := range ans.Results {
		fmt.Fprintln(c.Stdout, r.Message+".")
		if p := r.Lifted; p != nil {
			fmt.Fprintf(c.Stdout, "  It was paused since pass %d (term %d, %s): %s\n", p.Pass, p.Term, when(p.At), p.Reason)
		}
	}
	return ExitOK
}

// limitText is a breaker limit for a person: a number, or none.
func limitText(n int64) string {
	if n < 0 {
		return "none"
	}
	return strconv.FormatInt(n, 10)
}
