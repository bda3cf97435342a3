package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// defaultHealthcheckTimeout bounds one probe: below Docker's default
// HEALTHCHECK timeout of 30s, above /readyz's own bound on its checks.
const defaultHealthcheckTimeout = 10 * time.Second

// healthcheckCmd probes a running gateway's admin listener, /healthz or,
// with --ready, /readyz, and exits 0 when it answers 200 and 1 otherwise:
// what a container's HEALTHCHECK runs in an image with no shell or curl.
func (c *Client) healthcheckCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var admin string
	fs.StringVar(&admin, "admin", "", "")
	fs.StringVar(&c.adminConfig, "config", "", "")
	fs.StringVar(&c.adminCA, "admin-ca", "", "")
	ready := fs.Bool("ready", false, "")
	timeout := fs.Duration("timeout", defaultHealthcheckTimeout, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.healthcheckHelp(c.Stdout)
			return ExitOK
		}
		return c.usageError("healthcheck", err)
	}
	if fs.NArg() > 0 {
		return c.usageError("healthcheck", fmt.Errorf("unexpected argument %q", strings.Join(fs.Args(), " ")))
	}
	if *timeout <= 0 {
		return c.usageError("healthcheck", fmt.Errorf("--timeout must be positive, got %v", *timeout))
	}
	base, err := c.adminURL(admin)
	if err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate healthcheck: %v\n", err)
		return ExitUsage
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate healthcheck: %v\n", err)
		return ExitUsage
	}
	client, err := c.adminHTTP()
	if err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate healthcheck: %v\n", err)
		return ExitError
	}
	resp, err := client.Do(req)
	if err != nil {
		if msg := c.certificateProblem(err); msg != "" {
			fmt.Fprintf(c.Stderr, "sweepgate healthcheck: %s: %s\n", base+path, msg)
			return ExitError
		}
		fmt.Fprintf(c.Stderr, "sweepgate healthcheck: %s: %v\n", base+path, err)
		return ExitError
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	answer := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(c.Stderr, "sweepgate healthcheck: %s: %s %s\n", base+path, resp.Status, answer)
		return ExitError
	}
	fmt.Fprintf(c.Stdout, "%s: %s\n", base+path, answer)
	return ExitOK
}

func (c *Client) healthcheckHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: sweepgate healthcheck [--ready] [--admin URL] [--admin-ca FILE] [--config FILE] [--timeout D]

Asks a running gateway whether it is alive (/healthz) or, with --ready,
ready to serve (/readyz: the backend answers and it is not shutting down;
etcd is not asked, see /etcdz), and exits 0 when it answers 200, 1 otherwise. The container image's
HEALTHCHECK runs it, as the image has no shell or curl.

  --ready         probe /readyz instead of /healthz
  --admin URL     the gateway's admin listener (default $SWEEPGATE_ADMIN_URL,
                  else admin.listen of the configuration, as serve reads it,
                  reached on loopback when it listens on every address)
  --admin-ca FILE PEM file of the CA that signed the admin listener's
                  certificate (default $SWEEPGATE_ADMIN_CA, else the system's
                  roots); with it, an https:// URL or admin.tls_cert_file in
                  the configuration, the probe speaks https and verifies the
                  certificate, which must name the address probed (127.0.0.1
                  when admin.listen is on every address)
  --config FILE   the gateway's YAML configuration (default $SWEEPGATE_CONFIG)
  --timeout D     give up after D (default 10s)
`)
}
