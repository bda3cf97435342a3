package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
)

// The admin commands' side of the admin API: which API to call, the flags
// every command takes, one call and what its answer means.

const (
	// AdminURLEnv names the admin API the sessions command talks to when
	// --admin is not given.
	AdminURLEnv     = "SWEEPGATE_ADMIN_URL"
	defaultAdminURL = "http://" + config.DefaultAdminListen
	// adminClientTimeout bounds one admin API request, above the server's
	// own bound on its etcd reads.
	adminClientTimeout = 30 * time.Second
	// maxAdminAnswer bounds what the command reads from the admin API: a
	// session with 10000 parts is about 2 MiB.
	maxAdminAnswer = 64 << 20
)

// adminURL picks the admin API's URL: the --admin flag's value, else
// $SWEEPGATE_ADMIN_URL, else the address of admin.listen in the
// configuration (clientConfig; by default 127.0.0.1:9001), and checks it.
// The URL is https when it says so, when a CA is given (--admin-ca,
// $SWEEPGATE_ADMIN_CA) or, for the configuration's address, when the
// configuration sets admin.tls_cert_file.
func (c *Client) adminURL(flagValue string) (string, error) {
	u := flagValue
	if u == "" {
		u = envValue(c.Environ, AdminURLEnv)
	}
	tls := c.adminCAFile() != ""
	if u == "" {
		cfg, err := c.clientConfig()
		if err != nil {
			return "", err
		}
		if u, err = listenURL(cfg.Admin.Listen); err != nil {
			return "", err
		}
		if cfg.Admin.TLSCertFile != "" {
			u = "https" + strings.TrimPrefix(u, "http")
		}
	}
	return normalizeAdminURL(u, tls)
}

// listenURL returns the URL that reaches a listener configured as listen:
// an unspecified host (":9001", "0.0.0.0:9001", "[::]:9001") is reached on
// loopback.
func listenURL(listen string) (string, error) {
	if listen == "" {
		return "", errors.New("admin.listen is empty in the configuration, so the gateway serves no admin API; name one with --admin URL")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "0" {
		return "", fmt.Errorf("admin.listen %q of the configuration names no port to connect to; name the admin API with --admin URL", listen)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// parseInterspersed parses flags wherever they stand among the positional
// arguments, as people type them (`show B ID --json`); "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

func envValue(environ []string, name string) string {
	for _, kv := range slices.Backward(environ) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// normalizeAdminURL accepts host:port as well as a URL; host:port is
// https when tls is set (a CA was given), and an http:// URL is then
// refused, since the CA says the listener speaks TLS.
func normalizeAdminURL(raw string, tls bool) (string, error) {
	if !strings.Contains(raw, "://") {
		scheme := "http://"
		if tls {
			scheme = "https://"
		}
		raw = scheme + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("admin URL %q: want http://HOST:PORT or https://HOST:PORT (the gateway's admin.listen)", raw)
	}
	if tls && u.Scheme == "http" {
		return "", fmt.Errorf("admin URL %q is plain http, but a CA for its TLS certificate is given (--admin-ca or $%s): write https://", raw, AdminCAEnv)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// adminGet fetches path from the admin API and returns its body, or the
// exit code after reporting what went wrong.
func (c *Client) adminGet(ctx context.Context, name, base, path string, q url.Values) ([]byte, int) {
	status, body, code := c.adminDo(ctx, name, base, adminRequest{method: http.MethodGet, path: path, query: q, timeout: adminClientTimeout})
	if code != ExitOK {
		return nil, code
	}
	if status == http.StatusOK {
		return body, ExitOK
	}
	return nil, c.apiFailure(name, base+path, status, body)
}

// adminRequest is one call of the admin API.
type adminRequest struct {
	method, path string
	query        url.Values
	// body, when not nil, is sent as a JSON document.
	body any
	// timeout bounds the whole call; zero leaves it to ctx (a pass may
	// take long, and Ctrl-C ends it).
	timeout time.Duration
}

func (r adminRequest) url(base string) string {
	u := base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	return u
}

// adminSend sends req and returns the response, whose body the caller
// reads and closes, and done, which the caller calls when finished with
// it. When the API cannot be reached it reports that and returns the exit
// code instead.
func (c *Client) adminSend(ctx context.Context, name, base string, req adminRequest) (resp *http.Response, done func(), code int) {
	token, _, err := c.adminToken()
	if err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin token: %v\n", name, err)
		return nil, nil, ExitError
	}
	cancel := context.CancelFunc(func() {})
	if req.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, req.timeout)
	}
	var body io.Reader
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			cancel()
			fmt.Fprintf(c.Stderr, "sweepgate %s: %v\n", name, err)
			return nil, nil, ExitError
		}
		body = bytes.NewReader(b)
	}
	if c.adminShard != "" {
		q := url.Values{}
		for k, v := range req.query {
			q[k] = v
		}
		q.Set("shard", c.adminShard)
		req.query = q
	}
	hreq, err := http.NewRequestWithContext(ctx, req.method, req.url(base), body)
	if err != nil {
		cancel()
		fmt.Fprintf(c.Stderr, "sweepgate %s: %v\n", name, err)
		return nil, nil, ExitError
	}
	hreq.Header.Set("Accept", "application/json")
	if token != "" {
		hreq.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	client, err := c.adminHTTP()
	if err != nil {
		cancel()
		fmt.Fprintf(c.Stderr, "sweepgate %s: %v\n", name, err)
		return nil, nil, ExitError
	}
	resp, err = client.Do(hreq)
	if err != nil {
		cancel()
		if ctx.Err() != nil && req.timeout == 0 {
			fmt.Fprintf(c.Stderr, "sweepgate %s: interrupted: %v\n", name, err)
			return nil, nil, ExitError
		}
		if msg := c.certificateProblem(err); msg != "" {
			fmt.Fprintf(c.Stderr, "sweepgate %s: %s at %s: %s\n", name, "cannot reach the admin API", base, msg)
			return nil, nil, ExitError
		}
		fmt.Fprintf(c.Stderr, "sweepgate %s: cannot reach the admin API at %s: %v\nIs sweepgate serve running there? Point --admin or %s at its admin.listen.\n", name, base, err, AdminURLEnv)
		return nil, nil, ExitError
	}
	return resp, func() { resp.Body.Close(); cancel() }, ExitOK
}

// adminDo sends req and returns the answer's status and body, or, when the
// API cannot be reached or answered unreadably, the exit code after
// reporting what went wrong.
func (c *Client) adminDo(ctx context.Context, name, base string, req adminRequest) (status int, body []byte, code int) {
	resp, done, code := c.adminSend(ctx, name, base, req)
	if code != ExitOK {
		return 0, nil, code
	}
	defer done()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: reading the admin API's answer: %v\n", name, err)
		return 0, nil, ExitError
	}
	return resp.StatusCode, body, ExitOK
}

// decodeAPIError reads an error document; ok is false when body is not
// one (a proxy, another service, a sweepgate too old to have the
// endpoint).
func decodeAPIError(body []byte) (e adminapi.ErrorDetail, ok bool) {
	var doc adminapi.ErrorBody
	if json.Unmarshal(body, &doc) != nil || doc.Error.Code == "" {
		return adminapi.ErrorDetail{}, false
	}
	return doc.Error, true
}

// apiFailure reports an answer that is not a success and returns the exit
// code it means.
func (c *Client) apiFailure(name, u string, status int, body []byte) int {
	if status == http.StatusUnauthorized {
		return c.unauthorized(name, u)
	}
	e, ok := decodeAPIError(body)
	if !ok {
		snippet := strings.TrimSpace(string(body[:min(len(body), 200)]))
		fmt.Fprintf(c.Stderr, "sweepgate %s: %s answered %d %s, not the sweepgate admin API: %s\n", name, u, status, http.StatusText(status), snippet)
		return ExitError
	}
	fmt.Fprintf(c.Stderr, "sweepgate %s: %s\n", name, e.Message)
	switch {
	case status == http.StatusNotFound && e.Code == adminapi.CodeNotFound:
		return ExitNotFound
	case status == http.StatusBadRequest:
		return ExitUsage
	}
	return ExitError
}

func (c *Client) writeIndented(name string, body []byte) int {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: %v\n", name, err)
		return ExitError
	}
	buf.WriteByte('\n')
	if _, err := c.Stdout.Write(buf.Bytes()); err != nil {
		return ExitError
	}
	return ExitOK
}

// adminFlags are the flags every thin client of the admin API takes.
type adminFlags struct {
	admin string
	json  bool
}

// adminFlagsHelp is the help text of the flags parseAdminFlags defines
// for every command that calls the admin API (--admin, --token-file,
// --config), with descriptions starting at column width.
func adminFlagsHelp(width int) string {
	lines := [][2]string{
		{"--admin URL", "the gateway's admin listener (default $" + AdminURLEnv + ","},
		{"", "else admin.listen of the configuration, " + defaultAdminURL},
		{"", "unless it sets another)"},
		{"--token-file F", "send the admin token in file F (default"},
		{"", "$SWEEPGATE_ADMIN_TOKEN, else the file"},
		{"", "$SWEEPGATE_ADMIN_TOKEN_FILE names, else admin.token or"},
		{"", "admin.token_file of the configuration, else the token"},
		{"", "serve generated in the file admin-token of its"},
		{"", "etcd.embedded.data_dir)"},
		{"--config FILE", "the gateway's YAML configuration (default"},
		{"", "$SWEEPGATE_CONFIG), read with the SWEEPGATE_* environment"},
		{"", "as serve reads them: with the gateway's configuration the"},
		{"", "command finds its admin listener and its admin token"},
		{"--admin-ca FILE", "PEM file of the CA that signed the admin listener's"},
		{"", "certificate (admin.tls_cert_file; default $" + AdminCAEnv + ","},
		{"", "else the system's roots); with it, or an https:// URL, or"},
		{"", "admin.tls_cert_file in the configuration, the command"},
		{"", "speaks https and verifies the listener's certificate"},
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "  %-*s%s\n", width-2, l[0], l[1])
	}
	return b.String()
}

// parseAdminFlags parses args with the common flags and those that define
// adds, showing help on -h; ok is false when the command is done, with
// code its exit status.
func (c *Client) parseAdminFlags(name string, args []string, help func(*Client, io.Writer), define func(*flag.FlagSet)) (f adminFlags, pos []string, code int, ok bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.adminFlag(fs, &f.admin)
	fs.BoolVar(&f.json, "json", false, "")
	if define != nil {
		define(fs)
	}
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		help(c, c.Stdout)
		return f, nil, ExitOK, false
	}
	if err != nil {
		return f, nil, c.usageError(name, err), false
	}
	if f.admin, err = c.adminURL(f.admin); err != nil {
		return f, nil, c.usageError(name, err), false
	}
	return f, pos, ExitOK, true
}
