//go:build bench

package bench

// A bare reverse proxy as a reference for BenchmarkGateway's GET and small
// PUT figures and BenchmarkRegistryPull's:
// net/http's server and httputil.ReverseProxy in a process of its own,
// forwarding every request to MinIO as it came (the client signs for the
// proxy's host, which the proxy keeps, so MinIO accepts the signature).
// It verifies nothing, signs nothing and logs nothing: what it costs per
// request is what any proxy built on net/http pays before doing its work.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// proxyChildEnv makes this test binary a bare reverse proxy to the URL it
// holds (see init).
const proxyChildEnv = "SWEEPGATE_BENCH_PROXY_CHILD"

func init() {
	target, ln := listenAsChild(proxyChildEnv)
	if ln == nil {
		return
	}
	u, err := url.Parse(target)
	if err != nil {
		fmt.Fprintf(os.Stderr, "proxy child: %v\n", err)
		os.Exit(2)
	}
	// The gateway's own backend limits, so that the two compare alike.
	tr := &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true, WriteBufferSize: 64 << 10, ReadBufferSize: 64 << 10,
	}
	p := &httputil.ReverseProxy{Transport: tr, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host
	}}
	err = http.Serve(ln, p)
	fmt.Fprintf(os.Stderr, "proxy child: %v\n", err)
	os.Exit(2)
}

// listenAsChild is the start of a child server startChild runs: when env
// is set, it listens on a loopback port, prints "listening ADDR" for
// startChild, exits when the parent closes stdin, and returns env's value
// and the listener; when env is unset it returns a nil listener.
func listenAsChild(env string) (string, net.Listener) {
	value := os.Getenv(env)
	if value == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s child: %v\n", env, err)
		os.Exit(2)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	return value, ln
}

// bareProxy is a running reference proxy and a client that talks to it.
type bareProxy struct {
	pid int
	s3  *s3.Client
}

// startBareProxy runs the reference proxy in front of env's MinIO, in a
// child process stopped when b ends.
func startBareProxy(b *testing.B, env *harness.Env) bareProxy {
	b.Helper()
	addr, pid := startChild(b, proxyChildEnv, env.MinIO.Endpoint, "listening ", 10*time.Second)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	b.Cleanup(tr.CloseIdleConnections)
	c := harness.NewS3Client("http://"+addr, env.MinIO.Region, env.MinIO.AccessKey, env.MinIO.SecretKey, tr, true)
	return bareProxy{pid: pid, s3: c}
}

// seedSmall writes the small objects the GET workloads read.
func seedSmall(b *testing.B, c *s3.Client, bucket string, small []byte) {
	b.Helper()
	for i := range smallKeys {
		if _, err := c.PutObject(b.Context(), &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(fmt.Sprintf("small/get/%02d", i)), Body: bytes.NewReader(small),
		}); err != nil {
			b.Fatalf("seed small object %d: %v", i, err)
		}
	}
}

// smallGets is the 4 KiB GET workload, with the CPU of each side's process
// and of MinIO (procs) measured.
func smallGets(bucket string, procs *cpuProcs, name, title string) workload {
	return workload{
		name: name, title: title, unit: "ops/s", target: targetSmallRatio,
		rounds: smallRounds, cpu: procs,
		detail: fmt.Sprintf("GetObject of 4 KiB from %d goroutines sharing one client for %v", smallClients, smallRoundTime),
		run: func(ctx context.Context, s side) (float64, time.Duration, error) {
			return concurrentOps(ctx, smallClients, smallRoundTime, func(ctx context.Context, worker, i int) error {
				key := fmt.Sprintf("small/get/%02d", (worker*7+i)%smallKeys)
				n, err := getDiscard(ctx, s.s3, bucket, key)
				if err == nil && n != smallSize {
					err = fmt.Errorf("GET %s read %d bytes, want %d", key, n, smallSize)
				}
				return err
			})
		},
	}
}
