package cli

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"strings"

	"github.com/sweepgate/sweepgate/config"
)

// The command-line clients' side: where the token comes from.
const (
	// adminTokenEnv holds the token the admin commands send. It is also
	// the environment variable of the admin.token setting, so that one
	// variable configures a gateway and the commands run beside it.
	adminTokenEnv = config.EnvPrefix + "ADMIN_TOKEN"
	// adminTokenFileEnv names a file holding it, as admin.token_file does
	// for serve.
	adminTokenFileEnv = config.EnvPrefix + "ADMIN_TOKEN_FILE"
)

// adminFlag registers the flags that say which admin API to talk to and
// how to prove the right to: --admin URL, --token-file FILE, --config
// FILE and --admin-ca FILE. There is deliberately no --token: a token in a command line is
// visible to every user in the process list.
func (c *Client) adminFlag(fs *flag.FlagSet, admin *string) {
	fs.StringVar(admin, "admin", "", "")
	fs.StringVar(&c.adminTokenFile, "token-file", "", "")
	fs.StringVar(&c.adminConfig, "config", "", "")
	fs.StringVar(&c.adminCA, "admin-ca", "", "")
}

// shardFlag defines --shard, for the commands whose endpoints act on one
// etcd shard's state (etcd.shards): adminSend sends it as the shard
// parameter.
func (c *Client) shardFlag(fs *flag.FlagSet) {
	fs.StringVar(&c.adminShard, "shard", "", "")
}

// clientConfig returns the configuration a serve started with this
// environment and --config (else $SWEEPGATE_CONFIG) would have, loaded on
// first use: the admin commands take the admin listener's address and the
// admin token's sources from it.
func (c *Client) clientConfig() (*config.Config, error) {
	c.clientMu.Lock()
	defer c.clientMu.Unlock()
	if c.clientCfg == nil && c.clientCfgErr == nil {
		c.clientCfg, c.clientCfgErr = config.LoadClient(c.adminConfig, c.Environ)
		if c.clientCfgErr != nil {
			c.clientCfgErr = fmt.Errorf("the configuration: %w", c.clientCfgErr)
		}
	}
	return c.clientCfg, c.clientCfgErr
}

// adminToken returns the token to send and where it came from. The sources,
// first one set wins: the --token-file flag's file, $SWEEPGATE_ADMIN_TOKEN,
// the file $SWEEPGATE_ADMIN_TOKEN_FILE names, admin.token or
// admin.token_file of the configuration file (clientConfig), and last the
// token serve generated in the data directory of that configuration, the
// one serve uses when none of the others is set. Empty when there is none.
func (c *Client) adminToken() (token, from string, err error) {
	if c.adminTokenFile != "" {
		tok, err := config.ReadTokenFile(c.adminTokenFile)
		return tok, "--token-file " + c.adminTokenFile, err
	}
	if tok := strings.TrimSpace(envValue(c.Environ, adminTokenEnv)); tok != "" {
		return tok, "$" + adminTokenEnv, nil
	}
	if path := envValue(c.Environ, adminTokenFileEnv); path != "" {
		tok, err := config.ReadTokenFile(path)
		return tok, "$" + adminTokenFileEnv + " (" + path + ")", err
	}
	cfg, err := c.clientConfig()
	if err != nil {
		return "", "", err
	}
	switch {
	case cfg.Admin.Token != "":
		return string(cfg.Admin.Token), "admin.token of the configuration", nil
	case cfg.Admin.TokenFile != "":
		tok, err := config.ReadTokenFile(cfg.Admin.TokenFile)
		return tok, "admin.token_file of the configuration (" + cfg.Admin.TokenFile + ")", err
	}
	path := cfg.GeneratedAdminTokenPath()
	tok, err := config.ReadTokenFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	return tok, "the token file serve generated (" + path + ")", err
}

// unauthorized reports a 401 of the admin API and returns its exit code:
// either no token was sent, or the one sent is not the gateway's.
func (c *Client) unauthorized(name, u string) int {
	_, from, _ := c.adminToken()
	if from != "" {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s refused the token from %s: it is not the gateway's admin token\n", name, u, from)
		return ExitUnauthorized
	}
	looked := "the file " + config.AdminTokenFileName + " in etcd.embedded.data_dir"
	if cfg, err := c.clientConfig(); err == nil {
		looked = cfg.GeneratedAdminTokenPath()
	}
	fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s requires a token, and none was found: "+
		"set %s, pass --token-file FILE, or run the command with the gateway's configuration "+
		"(--config FILE or $%s, and its SWEEPGATE_* environment) so that it finds the token serve generated "+
		"(looked for %s)\n", name, u, adminTokenEnv, config.ConfigEnv, looked)
	return ExitUnauthorized
}
