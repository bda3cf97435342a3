//go:build e2e

package e2e

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestVirtualHostedStyle addresses buckets as BUCKET.localhost:PORT (the
// gateway is configured with the domain localhost) while connecting to
// 127.0.0.1, with aws-sdk-go-v2 and with raw requests signed for that Host.
func TestVirtualHostedStyle(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	u, err := url.Parse(e.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	vhost := bucket + ".localhost:" + u.Port()

	t.Run("aws-sdk-go-v2", func(t *testing.T) {
		rec := &harness.Recorder{}
		c := e.VirtualHostSDK(t, harness.WithTransport(rec.Wrap))
		d := harness.NewData(500, 2*mib+3)
		putData(t, c, bucket, "dir/vhost object", d, func(in *s3.PutObjectInput) {
			in.Metadata = map[string]string{"style": "virtual"}
		})
		requireObject(t, c, bucket, "dir/vhost object", d)
		requireObject(t, direct, bucket, "dir/vhost object", d)
		head, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("dir/vhost object")})
		if err != nil {
			t.Fatalf("HeadObject: %v", err)
		}
		if head.Metadata["style"] != "virtual" {
			t.Fatalf("metadata %v", head.Metadata)
		}
		list, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("dir/")})
		if err != nil {
			t.Fatalf("ListObjectsV2: %v", err)
		}
		if len(list.Contents) != 1 || aws.ToString(list.Contents[0].Key) != "dir/vhost object" {
			t.Fatalf("ListObjectsV2 listed %d objects", len(list.Contents))
		}
		if _, err := c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("dir/vhost object")}); err != nil {
			t.Fatalf("DeleteObject: %v", err)
		}
		requireAbsent(t, direct, bucket, "dir/vhost object")
		for _, r := range rec.Requests() {
			if strings.HasPrefix(r.Path, "/"+bucket) {
				t.Fatalf("%s %s was sent path-style; this test is about virtual-hosted-style", r.Method, r.Path)
			}
		}
	})

	t.Run("raw signed requests", func(t *testing.T) {
		hc := e.HTTPClient(t)
		body := harness.NewData(501, 10*kib).Bytes()
		put := newRequest(t, http.MethodPut, e.Endpoint+"/raw/key.bin", body)
		put.Host = vhost
		requireStatus(t, do(t, hc, signed(t, e, put, harness.SHA256Hex(body))), http.StatusOK)
		requireObject(t, direct, bucket, "raw/key.bin", harness.NewData(501, 10*kib))

		get := newRequest(t, http.MethodGet, e.Endpoint+"/raw/key.bin", nil)
		get.Host = vhost
		if got := requireStatus(t, do(t, hc, signed(t, e, get, harness.EmptySHA256)), http.StatusOK); !bytes.Equal(got, body) {
			t.Fatal("virtual-hosted GET returned other bytes")
		}

		list := newRequest(t, http.MethodGet, e.Endpoint+"/?list-type=2&prefix=raw%2F", nil)
		list.Host = vhost
		var result struct {
			Name     string   `xml:"Name"`
			Contents []string `xml:"Contents>Key"`
		}
		if err := xml.Unmarshal(requireStatus(t, do(t, hc, signed(t, e, list, harness.EmptySHA256)), http.StatusOK), &result); err != nil {
			t.Fatal(err)
		}
		if result.Name != bucket || len(result.Contents) != 1 || result.Contents[0] != "raw/key.bin" {
			t.Fatalf("virtual-hosted list: %+v", result)
		}

		// The bucket comes from the Host, which the signature covers: a
		// request signed for one bucket's host cannot be sent to another.
		moved := newRequest(t, http.MethodGet, e.Endpoint+"/raw/key.bin", nil)
		moved.Host = vhost
		signed(t, e, moved, harness.EmptySHA256)
		moved.Host = "other-" + vhost
		requireS3Error(t, do(t, hc, moved), http.StatusForbidden, "SignatureDoesNotMatch")
	})
}
