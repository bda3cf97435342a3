package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

const reloadPath = "/admin/v1/reload"

func (c *Client) reloadHelp(w io.Writer) {
	fmt.Fprintf(w, `Usage: sweepgate reload [flags]

Asks a running sweepgate to read its configuration again, as SIGHUP does
(POST /admin/v1/reload, see docs/admin-api.md): the client credentials
(credentials, credentials_file), the backend's keys (backend.secret_key,
backend.secret_key_file, backend.identities, reclaim.backend_identity) and
the TLS certificates of the S3 and admin listeners (tls_cert_file,
admin.tls_cert_file and their keys) take effect at once, without dropping
a connection. A configuration it cannot apply changes
nothing: the gateway keeps the values it had, and the command prints why.
Settings that need a restart are named.

Flags:
%s  --json          print the API's JSON document

Exit status: 0 reloaded, 1 the reload was refused (or the admin API is
unreachable), 2 bad command line, 5 the admin API refused the request for
want of the right admin token.
`, adminFlagsHelp(18))
}

// reloadCmd asks a running gateway to reload its configuration.
func (c *Client) reloadCmd(ctx context.Context, args []string) int {
	const name = "reload"
	f, pos, code, ok := c.parseAdminFlags(name, args, (*Client).reloadHelp, nil)
	if !ok {
		return code
	}
	if code, ok := c.noArgs(name, pos); !ok {
		return code
	}
	status, body, code := c.adminDo(ctx, name, f.admin, adminRequest{method: http.MethodPost, path: reloadPath, body: struct{}{}, timeout: adminClientTimeout})
	if code != ExitOK {
		return code
	}
	var ans adminapi.ReloadResult
	if status != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.RestartNeeded == nil {
		return c.apiFailure(name, f.admin+reloadPath, status, body)
	}
	if f.json {
		return c.writeIndented(name, body)
	}
	fmt.Fprintln(c.Stdout, "Reloaded: the client credentials, the backend's keys and the TLS certificates in effect are those of the configuration now.")
	if len(ans.RestartNeeded) > 0 {
		fmt.Fprintf(c.Stdout, "Changed, but in effect only after a restart: %s.\n", strings.Join(ans.RestartNeeded, ", "))
	}
	return ExitOK
}
