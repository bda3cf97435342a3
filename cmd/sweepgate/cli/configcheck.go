package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/reload"
)

const configPath = "/admin/v1/config"

func (c *Client) configHelp(w io.Writer) {
	fmt.Fprintf(w, `Usage: sweepgate config check [serve's flags] [--against-running] [--admin URL]
                              [--admin-ca FILE] [--token-file F]

Reads the configuration exactly as 'sweepgate serve' would with the same
flags, SWEEPGATE_* environment and YAML file (--config FILE, else
$SWEEPGATE_CONFIG), validates it as serve does (the files it names are read,
the TLS certificates and keys loaded), and prints every setting as
key = value, secrets redacted. It starts no listener and contacts neither
etcd nor the backend. An invalid configuration prints every problem found.

With --against-running (or --admin URL), it also asks the running gateway
for the configuration it runs on (GET /admin/v1/config, behind the admin
token) and prints each setting that differs, marked "applies at reload"
(sweepgate reload, or SIGHUP) or "needs a restart". The gateway shows
secrets redacted too, so they are compared as shown: whether each is set,
and a credential's access key and principal; a secret rotated in place
does not show, but a changed file setting (backend.secret_key_file,
credentials_file, ...) does. Relative paths are read from the current
directory, which may not be the gateway's.

Flags: every flag of 'sweepgate serve' (sweepgate serve --help), and
  --against-running   compare with the running gateway's configuration
%s
Exit status: 0 valid, 1 invalid (or the running gateway could not be
asked), 2 bad command line, 5 the admin API refused the request for want
of the right admin token.
`, adminFlagsHelp(22))
}

// configCmd runs `sweepgate config SUBCOMMAND`.
func (c *Client) configCmd(ctx context.Context, args []string) int {
	return c.runSubcommand(ctx, "config", func(w io.Writer) { c.configHelp(w) }, args,
		subcommand{"check", c.configCheck})
}

// configCheck loads and validates the configuration as serve would,
// prints it, and with --against-running what a reload or a restart of the
// running gateway would change.
func (c *Client) configCheck(ctx context.Context, args []string) int {
	const name = "config check"
	var admin string
	var against bool
	cfg, path, err := config.LoadWith(args, c.Environ, func(fs *flag.FlagSet) {
		fs.StringVar(&admin, "admin", "", "")
		fs.StringVar(&c.adminTokenFile, "token-file", "", "")
		fs.StringVar(&c.adminCA, "admin-ca", "", "")
		fs.BoolVar(&against, "against-running", false, "")
	})
	if err == nil {
		err = reload.CheckCertificates(cfg)
	}
	if err != nil {
		var usage *config.UsageError
		switch {
		case errors.Is(err, flag.ErrHelp):
			c.configHelp(c.Stdout)
			return ExitOK
		case errors.As(err, &usage):
			return c.usageError(name, err)
		}
		fmt.Fprintf(c.Stderr, "sweepgate %s: invalid configuration:\n  %s\nRun 'sweepgate serve --help' for every setting.\n",
			name, strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return ExitError
	}
	from := "defaults, the SWEEPGATE_* environment and flags"
	if path != "" {
		from = path + ", " + from
	}
	fmt.Fprintf(c.Stdout, "# The configuration is valid (%s). Secrets are shown as [redacted].\n", from)
	for _, s := range config.Settings() {
		fmt.Fprintf(c.Stdout, "%s = %s\n", s.Key, s.Value(cfg))
	}
	if !against && admin == "" {
		return ExitOK
	}
	c.adminConfig = path
	base, err := c.adminURL(admin)
	if err != nil {
		return c.usageError(name, err)
	}
	return c.compareRunning(ctx, name, base, cfg)
}

// compareRunning prints the settings in which cfg differs from the
// configuration the gateway at base runs on.
func (c *Client) compareRunning(ctx context.Context, name, base string, cfg *config.Config) int {
	body, code := c.adminGet(ctx, name, base, configPath, nil)
	if code != ExitOK {
		return code
	}
	var doc adminapi.ConfigDoc
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Settings) == 0 {
		fmt.Fprintf(c.Stderr, "sweepgate %s: %s answered no configuration document\n", name, base+configPath)
		return ExitError
	}
	running := make(map[string]string, len(doc.Settings))
	for _, s := range doc.Settings {
		running[s.Key] = s.Value
	}
	changes := config.Diff(running, cfg)
	fmt.Fprintf(c.Stdout, "\n# Compared with the configuration the gateway at %s runs on:\n", base)
	if len(changes) == 0 {
		fmt.Fprintln(c.Stdout, "# no setting differs.")
	}
	restart := 0
	for _, ch := range changes {
		when := "applies at reload"
		if !ch.Reload {
			when = "needs a restart"
			restart++
		}
		fmt.Fprintf(c.Stdout, "%s: %s -> %s (%s)\n", ch.Key, ch.Running, ch.Candidate, when)
	}
	if len(changes) > 0 {
		fmt.Fprintf(c.Stdout, "# %d settings differ: %d apply at reload (sweepgate reload, or SIGHUP), %d need a restart.\n",
			len(changes), len(changes)-restart, restart)
	}
	fmt.Fprintln(c.Stdout, "# Secrets are compared redacted: a secret changed in place (same key, same file) does not show.")
	return ExitOK
}
