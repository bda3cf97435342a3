//go:build integration

package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// squatter is a server somebody else started on a port the harness had
// reserved, between the reservation and the server binding it: it answers
// every readiness probe of MinIO and the gateway as a ready server would
// (403 for "/", 200 for anything else), so only the identity check can tell
// it from the server the harness started.
type squatter struct {
	port int
	hits int
	mu   sync.Mutex
}

// squatFirst makes the next reservation of launch lose its port at index i
// to a squatter, once; the squatter stops with the test.
func squatFirst(t *testing.T, i int) *squatter {
	t.Helper()
	sq := &squatter{}
	var once sync.Once
	testHookReserved = func(ports []int) {
		once.Do(func() {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports[i]))
			if err != nil {
				t.Errorf("squat on %d: %v", ports[i], err)
				return
			}
			sq.port = ports[i]
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sq.mu.Lock()
				sq.hits++
				sq.mu.Unlock()
				if r.URL.Path == "/" {
					w.WriteHeader(http.StatusForbidden)
				}
			})}
			go func() { _ = srv.Serve(l) }()
			t.Cleanup(func() { srv.Close() })
		})
	}
	t.Cleanup(func() { testHookReserved = nil })
	return sq
}

// TestServersOnOwnPorts starts MinIO and a gateway in front of it, each
// losing the port its readiness is checked on to a squatter that answers
// that check, and asserts that the test ends up talking to the servers it
// started: each holds its ports, and an object written through the gateway
// with this test's credentials is read back from this test's MinIO.
// TestServersOnOwnPortsContended runs it in several processes at once.
func TestServersOnOwnPorts(t *testing.T) {
	minioSquatter := squatFirst(t, 0) // MinIO's S3 port
	m := StartMinIO(t)
	gatewaySquatter := squatFirst(t, 2) // the gateway's admin port, where /readyz is asked
	g := StartGateway(t, m, Options{})

	for _, sq := range []*squatter{minioSquatter, gatewaySquatter} {
		if sq.port == 0 {
			t.Fatal("the squatter did not take a port")
		}
	}
	if p := urlPort(m.Endpoint); p == minioSquatter.port {
		t.Fatalf("MinIO's endpoint %s is the squatter's port", m.Endpoint)
	}
	if p := urlPort(g.AdminEndpoint); p == gatewaySquatter.port {
		t.Fatalf("the gateway's admin endpoint %s is the squatter's port", g.AdminEndpoint)
	}
	CheckHoldsPorts(t, m.proc.pid(), urlPort(m.Endpoint))
	CheckHoldsPorts(t, g.PID(), g.ports...)

	// This test's own credentials work on both, and what goes in through
	// the gateway is in this test's MinIO.
	ctx := t.Context()
	direct := NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport, true)
	through := NewS3Client(g.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport, true)
	bucket, body := BucketName(t), []byte("written by "+t.Name()+" in pid "+strconv.Itoa(os.Getpid()))
	if _, err := through.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket through the gateway: %v", err)
	}
	if _, err := through.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("put through the gateway: %v", err)
	}
	out, err := direct.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("get from MinIO: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("MinIO has %q (%v), want %q", got, err, body)
	}
}

// contendedWorkers is how many test processes compete for the narrow port
// range at once; each needs 7 ports and leaves a squatter on 2.
const contendedWorkers = 4

// TestServersOnOwnPortsContended runs TestServersOnOwnPorts in several test
// processes at once (as parallel test packages run) with the reservation
// range narrowed to barely more ports than they need together, so that
// they compete for the same ports: every one must get its own servers.
func TestServersOnOwnPortsContended(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := BuildSweepgate(t) // built once here, not in every worker
	// The range sits in the default one, so the other packages' tests
	// running meanwhile contend for it too.
	lo := 30000
	hi := lo + contendedWorkers*(7+2) + 4
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	type result struct {
		out []byte
		err error
	}
	results := make([]result, contendedWorkers)
	var wg sync.WaitGroup
	for i := range contendedWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, self, "-test.run=^TestServersOnOwnPorts$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(),
				fmt.Sprintf("%s=%d-%d", portRangeEnv, lo, hi),
				"SWEEPGATE_BIN="+bin)
			results[i].out, results[i].err = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	retries := 0
	for i, r := range results {
		if r.err != nil || !strings.Contains(string(r.out), "--- PASS: TestServersOnOwnPorts") {
			t.Errorf("worker %d: %v\n%s", i, r.err, r.out)
		}
		retries += strings.Count(string(r.out), "harness: ")
	}
	// Each worker's squatters alone make two starts move to new ports.
	if retries < 2*contendedWorkers {
		t.Errorf("the workers logged %d starts moved off a taken port, want at least %d", retries, 2*contendedWorkers)
	}
	t.Logf("%d workers in ports %d-%d: %d starts moved off a taken port", contendedWorkers, lo, hi, retries)
}
