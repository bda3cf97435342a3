// Command etcdmember runs one member of a static etcd cluster, in its own
// process, with the same etcd server code that sweepgate embeds.
//
// It exists only for tests and for trying a multi-node deployment on one
// machine without containers: the e2e harness (harness.StartEtcdCluster)
// starts three of them so that a test can kill one member with SIGKILL and
// restart it, which an in-process server cannot model. Production
// deployments run a real etcd cluster and point etcd.endpoints at it.
//
// Usage:
//
//	etcdmember --name a --data-dir /tmp/a \
//	    --listen-client-url http://127.0.0.1:23790 \
//	    --listen-peer-url http://127.0.0.1:23800 \
//	    --initial-cluster a=http://127.0.0.1:23800,b=http://127.0.0.1:23801,c=http://127.0.0.1:23802
//
// It prints "etcdmember NAME ready CLIENT_URL" on standard output once the
// member serves clients (which needs a quorum of the cluster to be up), and
// stops cleanly on SIGTERM or SIGINT. etcd's own log goes to standard error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Exit statuses: 2 is what the flag package uses for a command line it
// cannot parse.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal starts a clean stop, restore the default
		// handling so that a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line's values.
type options struct {
	name           string
	dataDir        string
	clientURL      string
	peerURL        string
	initialCluster string
	clusterState   string
	clusterToken   string
	heartbeat      time.Duration
	election       time.Duration
	startTimeout   time.Duration
	logLevel       string
	noFsync        bool
	// Client TLS: the member's certificate and key for an https client
	// URL, and the CA whose client certificates it requires.
	certFile, keyFile, trustedCAFile string
}

// run is the whole command, apart from the process's signals and exit, so
// that it reads top to bottom: parse, start, wait for ready, wait for a
// signal, stop.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "etcdmember: %v\n", err)
		return exitUsage
	}
	cfg, err := embedConfig(opts)
	if err != nil {
		fmt.Fprintf(stderr, "etcdmember: %v\n", err)
		return exitUsage
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "etcdmember: start %s: %v\n", opts.name, err)
		return exitError
	}
	// Close stops the server: a leader first hands its lead to a peer, so
	// that the rest of the cluster does not wait out an election timeout.
	defer e.Close()

	timer := time.NewTimer(opts.startTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		fmt.Fprintf(stderr, "etcdmember: %s failed while starting: %v\n", opts.name, err)
		return exitError
	case <-timer.C:
		// A new member is ready only once a quorum has formed; one that
		// waits this long is missing its peers.
		fmt.Fprintf(stderr, "etcdmember: %s not ready after %s (are a quorum of --initial-cluster's members running?)\n", opts.name, opts.startTimeout)
		return exitError
	case <-ctx.Done():
		return exitOK
	}
	fmt.Fprintf(stdout, "etcdmember %s ready %s\n", opts.name, opts.clientURL)

	select {
	case <-ctx.Done():
		return exitOK
	case err := <-e.Err():
		fmt.Fprintf(stderr, "etcdmember: %s failed: %v\n", opts.name, err)
		return exitError
	}
}

// parse reads the command line. Every URL and the cluster are required:
// a member that guessed them would form a cluster nobody asked for.
func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("etcdmember", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.name, "name", "", "this member's name, as in --initial-cluster (required)")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory of the member's WAL and database; it survives restarts (required)")
	fs.StringVar(&o.clientURL, "listen-client-url", "", "URL where the member serves clients, e.g. http://127.0.0.1:2379 (required)")
	fs.StringVar(&o.peerURL, "listen-peer-url", "", "URL where the member talks raft with its peers, e.g. http://127.0.0.1:2380 (required)")
	fs.StringVar(&o.initialCluster, "initial-cluster", "", "every member as NAME=PEER_URL, comma-separated, this one included (required)")
	fs.StringVar(&o.clusterState, "initial-cluster-state", embed.ClusterStateFlagNew,
		"new to form the cluster; existing to rejoin it (a data directory that holds a WAL rejoins either way)")
	fs.StringVar(&o.clusterToken, "initial-cluster-token", "etcdmember",
		"token that keeps members of different clusters from joining each other")
	fs.DurationVar(&o.heartbeat, "heartbeat-interval", 100*time.Millisecond, "raft heartbeat interval")
	fs.DurationVar(&o.election, "election-timeout", time.Second,
		"raft election timeout: how long followers wait for a dead leader before electing another")
	fs.DurationVar(&o.startTimeout, "start-timeout", time.Minute, "how long to wait for the member to serve clients before giving up")
	fs.StringVar(&o.logLevel, "log-level", "info", "etcd's log level: debug, info, warn or error")
	fs.StringVar(&o.certFile, "cert-file", "", "PEM certificate served to clients on an https --listen-client-url")
	fs.StringVar(&o.keyFile, "key-file", "", "PEM private key of --cert-file")
	fs.StringVar(&o.trustedCAFile, "trusted-ca-file", "", "PEM CA whose client certificates the member requires (client certificate authentication); empty asks for none")
	fs.BoolVar(&o.noFsync, "unsafe-no-fsync", false,
		"skip fsync: a killed process loses nothing (the kernel keeps its writes), a machine crash may; for tests on slow disks only")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: etcdmember --name NAME --data-dir DIR --listen-client-url URL --listen-peer-url URL --initial-cluster NAME=URL,...

Runs one member of a static etcd cluster in this process, for tests and
local multi-node trials of sweepgate (not for production: run etcd itself).
Prints "etcdmember NAME ready CLIENT_URL" once it serves clients, and stops
cleanly on SIGTERM or SIGINT.

Example, the first of three members (start the other two likewise):

  etcdmember --name a --data-dir .data/a \
      --listen-client-url http://127.0.0.1:23790 --listen-peer-url http://127.0.0.1:23800 \
      --initial-cluster a=http://127.0.0.1:23800,b=http://127.0.0.1:23801,c=http://127.0.0.1:23802

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for _, req := range []struct{ flag, value string }{
		{"name", o.name}, {"data-dir", o.dataDir}, {"listen-client-url", o.clientURL},
		{"listen-peer-url", o.peerURL}, {"initial-cluster", o.initialCluster},
	} {
		if req.value == "" {
			return o, fmt.Errorf("--%s is required (see --help)", req.flag)
		}
	}
	if strings.HasPrefix(o.clientURL, "https://") != (o.certFile != "" && o.keyFile != "") {
		return o, errors.New("an https --listen-client-url needs --cert-file and --key-file, and they need one")
	}
	if o.clusterState != embed.ClusterStateFlagNew && o.clusterState != embed.ClusterStateFlagExisting {
		return o, fmt.Errorf("--initial-cluster-state %q: want new or existing", o.clusterState)
	}
	if o.heartbeat < time.Millisecond || o.election < 5*o.heartbeat {
		// etcd requires the election timeout to be at least five
		// heartbeats; say so before it does, in flag names.
		return o, fmt.Errorf("--election-timeout %s must be at least five --heartbeat-interval %s (at least 1ms)", o.election, o.heartbeat)
	}
	return o, nil
}

// embedConfig turns the options into etcd's configuration. The member
// advertises the URLs it listens on: on one machine they are the same.
func embedConfig(o options) (*embed.Config, error) {
	client, err := url.Parse(o.clientURL)
	if err != nil {
		return nil, fmt.Errorf("--listen-client-url: %w", err)
	}
	peer, err := url.Parse(o.peerURL)
	if err != nil {
		return nil, fmt.Errorf("--listen-peer-url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = o.name
	cfg.Dir = o.dataDir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = o.initialCluster
	cfg.InitialClusterToken = o.clusterToken
	cfg.ClusterState = o.clusterState
	cfg.TickMs = uint(o.heartbeat / time.Millisecond)
	cfg.ElectionMs = uint(o.election / time.Millisecond)
	cfg.UnsafeNoFsync = o.noFsync
	cfg.ClientTLSInfo.CertFile = o.certFile
	cfg.ClientTLSInfo.KeyFile = o.keyFile
	if o.trustedCAFile != "" {
		cfg.ClientTLSInfo.TrustedCAFile = o.trustedCAFile
		cfg.ClientTLSInfo.ClientCertAuth = true
	}
	cfg.LogLevel = o.logLevel
	cfg.LogOutputs = []string{"stderr"}
	// embed.NewConfig leaves this at zero, which logs every request as
	// slow; etcd's own command line defaults it to 300ms.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	return cfg, nil
}
