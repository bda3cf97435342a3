package etcdstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// DefaultDialTimeout bounds how long Connect waits for etcd to answer.
const DefaultDialTimeout = 5 * time.Second

// healthKey is the key etcdctl's endpoint health reads; reading it, present
// or not, needs a quorum when the read is linearizable.
const healthKey = "health"

// Connect opens a client to the etcd cluster at endpoints and proves that the
// cluster answers (see Health) before returning it, so that a wrong endpoint
// fails at startup with a clear error instead of on the first request. It
// waits at most dialTimeout (DefaultDialTimeout when zero) or until ctx is
// done. The caller closes the client.
//
// The client logs nothing: its only records are retries that the caller sees
// as errors anyway. Use ConnectLogged to keep its warnings.
func Connect(ctx context.Context, endpoints []string, dialTimeout time.Duration) (*clientv3.Client, error) {
	return ConnectLogged(ctx, endpoints, dialTimeout, nil)
}

// ConnectLogged is Connect with the client's warnings and errors written to
// log (its info records at debug level).
func ConnectLogged(ctx context.Context, endpoints []string, dialTimeout time.Duration, log *slog.Logger) (*clientv3.Client, error) {
	return ConnectSecure(ctx, endpoints, dialTimeout, Credentials{}, log)
}

// Credentials are how a client proves itself to a secured cluster: TLS
// (the cluster's CA, and a client certificate when the cluster asks for
// one) and etcd's user authentication. The zero value connects in the
// clear, anonymously.
type Credentials struct {
	// TLS is used for https:// endpoints; nil uses the system's roots.
	TLS *tls.Config
	// Username and Password sign the client in; empty Username skips it.
	Username, Password string
}

// reconnectMaxDelay is the longest a client waits between attempts to
// reach a member it lost.
const reconnectMaxDelay = 2 * time.Second

// ConnectSecure is ConnectLogged with credentials.
func ConnectSecure(ctx context.Context, endpoints []string, dialTimeout time.Duration, creds Credentials, log *slog.Logger) (*clientv3.Client, error) {
	cli, err := Dial(endpoints, dialTimeout, creds, log)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, cmp.Or(dialTimeout, DefaultDialTimeout))
	defer cancel()
	if err := Health(hctx, cli); err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcdstore: connect to %s: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// Dial returns a client of the etcd cluster at endpoints without waiting
// for it to answer: its requests wait for (or fail on) the cluster, each
// under its own context. A process that must start while etcd is down
// dials, and learns whether etcd answers from Health. extra are gRPC dial
// options added to the client's own (serve's tracing instruments the
// client with one).
func Dial(endpoints []string, dialTimeout time.Duration, creds Credentials, log *slog.Logger, extra ...grpc.DialOption) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcdstore: no etcd endpoints")
	}
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		Logger:      newZapLogger(log, "etcd-client", nil),
		// Without keepalives a half-open connection to a dead member is only
		// noticed when a request times out.
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		TLS:                  creds.TLS,
		Username:             creds.Username,
		Password:             creds.Password,
		// gRPC waits up to two minutes between attempts to reconnect to a
		// member that went away; etcd coming back must be noticed within
		// seconds, so that multipart calls and the reclaimer resume.
		DialOptions: append([]grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMaxDelay},
			MinConnectTimeout: dialTimeout,
		})}, extra...),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: connect to %s: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// Health returns nil when the cluster can serve sweepgate: a linearizable read
// succeeds (so a quorum is reachable and has a leader) and no alarm is raised.
// An alarm such as NOSPACE makes etcd refuse writes, so a gateway that would
// record sessions there is not healthy even though reads still work.
func Health(ctx context.Context, cli *clientv3.Client) error {
	// A linearizable Get goes through raft's read index: it fails without a
	// leader, where a serializable one would answer from a lone member.
	_, err := cli.Get(ctx, healthKey, clientv3.WithCountOnly())
	if err != nil && !errors.Is(err, rpctypes.ErrPermissionDenied) {
		// Permission denied still proves a quorum answered (etcdctl's rule).
		return fmt.Errorf("etcdstore: health read: %w", err)
	}
	alarms, err := cli.AlarmList(ctx)
	if errors.Is(err, rpctypes.ErrPermissionDenied) {
		// A user without the root role may not list alarms; a NOSPACE
		// alarm then shows as refused writes instead.
		return nil
	}
	if err != nil {
		return fmt.Errorf("etcdstore: health alarm list: %w", err)
	}
	if len(alarms.Alarms) > 0 {
		names := make([]string, 0, len(alarms.Alarms))
		for _, a := range alarms.Alarms {
			names = append(names, fmt.Sprintf("%s on member %x", a.Alarm, a.MemberID))
		}
		return fmt.Errorf("etcdstore: etcd alarm raised: %s", strings.Join(names, ", "))
	}
	return nil
}

// accessProbe is the key, under the prefix, that CheckAccess writes.
const accessProbe = "access-check"

// CheckAccess proves that cli may read and write the keys under keys'
// prefix, by writing and reading one key there, so that a user whose role
// lacks them fails at startup with a clear error rather than on its first
// session. It is cheap at any size: one key, not a range.
func CheckAccess(ctx context.Context, cli *clientv3.Client, keys Keys) error {
	probe := keys.Root() + accessProbe
	_, err := cli.Put(ctx, probe, "")
	if err == nil {
		_, err = cli.Get(ctx, probe)
	}
	if errors.Is(err, rpctypes.ErrPermissionDenied) {
		return fmt.Errorf("etcdstore: etcd refuses this user the keys under %s: grant its role readwrite on that prefix's range: %w", keys.Root(), err)
	}
	if err != nil {
		return fmt.Errorf("etcdstore: write and read %s: %w", probe, err)
	}
	return nil
}
