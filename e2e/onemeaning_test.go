//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The one-meaning tests send requests that the gateway and MinIO could read
// as two different operations, or on two different keys, and check that
// whatever the gateway lets through keeps the protection of what MinIO
// executes: a referenced blob is not deleted or overwritten, no blob key
// ends up with content that does not hash to its digest, and another
// principal's upload is neither listed to, changed, completed nor aborted
// by bob. Each request must be refused, or served without harm (MinIO's
// own error for a call it was asked for counts as served); which of the
// two is the gateway's choice, and each case says what came back and what
// reached MinIO when it fails.

// s3SubResources are the query parameters S3 defines as sub-resources: each
// turns a request on an object or a bucket into another call.
var s3SubResources = []string{
	"acl", "attributes", "legal-hold", "restore", "retention", "select", "tagging", "torrent",
	"accelerate", "analytics", "cors", "encryption", "intelligent-tiering", "inventory", "lifecycle",
	"logging", "metrics", "notification", "object-lock", "ownershipControls", "policy", "policyStatus",
	"publicAccessBlock", "replication", "requestPayment", "versioning", "website", "location",
	"versions", "events", "lambdaArn",
}

// TestOneMeaningSubresources: every sub-resource S3 defines, added to a
// request the gateway protects — the DELETE or DeleteObjects of a
// referenced blob, a blob PUT whose body does not hash to its key (to a
// new key and over the referenced blob), and bob's ListMultipartUploads,
// UploadPart, CompleteMultipartUpload and AbortMultipartUpload on alice's
// upload — is refused or served with the protection intact. Afterwards,
// on MinIO, the referenced blob holds its bytes and alice's upload its
// part, her session (read with `sweepgate sessions show`) is active, and
// she completes the upload.
func TestOneMeaningSubresources(t *testing.T) {
	t.Parallel()
	f := startOneMeaning(t)
	start := time.Now()
	sub := func(s string, q url.Values) url.Values {
		if q == nil {
			q = url.Values{}
		}
		q.Set(s, "")
		return q
	}
	targets := []struct {
		name  string
		send  func(t *testing.T, s string) answer
		check func(t *testing.T, a answer)
	}{
		{"DeleteObject of a referenced blob", func(t *testing.T, s string) answer {
			return f.bob(http.MethodDelete, f.ref.key, sub(s, nil), nil).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkRef(t) }},
		{"DeleteObjects naming a referenced blob", func(t *testing.T, s string) answer {
			doc, sum := deleteDoc(f.ref.key)
			return f.bob(http.MethodPost, "", sub(s, url.Values{"delete": {""}}), doc, "Content-MD5", sum).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkRef(t) }},
		{"PutObject of a blob with a wrong body", func(t *testing.T, s string) answer {
			return f.bob(http.MethodPut, f.fresh.key, sub(s, nil), f.wrong).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkNamespace(t) }},
		{"PutObject over a referenced blob with a wrong body", func(t *testing.T, s string) answer {
			return f.bob(http.MethodPut, f.ref.key, sub(s, nil), f.wrong).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkRef(t); f.checkNamespace(t) }},
		{"ListMultipartUploads by another principal", func(t *testing.T, s string) answer {
			return f.bob(http.MethodGet, "", sub(s, url.Values{"uploads": {""}}), nil).must(t, f.hc)
		}, func(t *testing.T, a answer) { f.checkListing(t, a); f.checkVictim(t) }},
		{"UploadPart on another principal's upload", func(t *testing.T, s string) answer {
			return f.bob(http.MethodPut, f.victim.key, sub(s, uploadQ(f.victim.id, "partNumber", "1")), f.wrong).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkVictim(t) }},
		{"CompleteMultipartUpload of another principal's upload", func(t *testing.T, s string) answer {
			return f.bob(http.MethodPost, f.victim.key, sub(s, uploadQ(f.victim.id)), completeXML(f.victim.parts...)).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkVictim(t) }},
		{"AbortMultipartUpload of another principal's upload", func(t *testing.T, s string) answer {
			return f.bob(http.MethodDelete, f.victim.key, sub(s, uploadQ(f.victim.id)), nil).must(t, f.hc)
		}, func(t *testing.T, _ answer) { f.checkVictim(t) }},
	}
	for _, s := range s3SubResources {
		t.Run(s, func(t *testing.T) {
			for _, tg := range targets {
				t.Run(tg.name, func(t *testing.T) {
					f.attempt(t, func(t *testing.T) answer { return tg.send(t, s) }, tg.check)
				})
			}
		})
	}
	t.Logf("%d sub-resources on %d targets in %v", len(s3SubResources), len(targets), time.Since(start).Round(time.Millisecond))

	t.Run("afterwards", func(t *testing.T) {
		if got, found := f.get(t, f.ref.key); !found || !bytes.Equal(got, f.ref.body) {
			t.Errorf("the referenced blob on MinIO: found %v, %d bytes; want its %d bytes", found, len(got), len(f.ref.body))
		}
		if ids := backendUploads(t, f.direct, f.bucket); !slices.Contains(ids, f.victim.id) {
			t.Errorf("MinIO lists uploads %v, not alice's %s", ids, f.victim.id)
		}
		if got := backendPartNumbers(t, f.direct, f.bucket, f.victim.key, f.victim.id); !maps.Equal(got, f.victim.etags) {
			t.Errorf("MinIO holds parts %v of alice's upload, want %v", got, f.victim.etags)
		}
		out := mustSweepgate(t, 0, f.e.Gateway.AdminEndpoint, "sessions", "show", f.bucket, f.victim.id, "--json")
		if p := f.sessionProblem([]byte(out)); p != "" {
			t.Errorf("sweepgate sessions show: %s", p)
		}
		if _, err := completeUpload(t.Context(), f.alice, f.bucket, f.victim.key, f.victim.id, f.victim.parts); err != nil {
			t.Fatalf("alice completes her upload: %v", err)
		}
		requireObject(t, f.direct, f.bucket, f.victim.key, harness.NewData(7801, 64*kib))
	})
}

// TestOneMeaningRewrittenKeys: paths MinIO may read as another key (empty
// and dot segments, in the bucket's place too, and their percent-encoded
// forms), DeleteObjects documents whose keys have such segments, and copy
// sources that reach an object of wrong content by such a path, aimed at
// the referenced blob or at a blob key never stored: each is refused or
// acts with the protection of the key MinIO acts on. The referenced blob
// keeps its bytes and no blob key gets content that does not hash to it.
func TestOneMeaningRewrittenKeys(t *testing.T) {
	t.Parallel()
	f := startOneMeaning(t)
	b := f.bucket
	vhost := b + ".localhost:" + fmt.Sprint(f.e.Gateway.Port())
	paths := func(key string) []pathSpelling { return rewrittenPaths(b, vhost, key) }
	t.Run("path", func(t *testing.T) {
		for _, p := range paths(f.ref.key) {
			t.Run("DeleteObject of a referenced blob, "+p.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer { return f.bobAt(t, http.MethodDelete, p.host, p.path, nil) },
					func(t *testing.T, _ answer) { f.checkRef(t) })
			})
			t.Run("PutObject over a referenced blob with a wrong body, "+p.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer { return f.bobAt(t, http.MethodPut, p.host, p.path, f.wrong) },
					func(t *testing.T, _ answer) { f.checkRef(t); f.checkNamespace(t) })
			})
		}
		for _, p := range paths(f.fresh.key) {
			t.Run("PutObject of a blob with a wrong body, "+p.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer { return f.bobAt(t, http.MethodPut, p.host, p.path, f.wrong) },
					func(t *testing.T, _ answer) { f.checkNamespace(t) })
			})
		}
	})

	t.Run("DeleteObjects key", func(t *testing.T) {
		k, dir, base := f.ref.key, "blobs/sha256", f.ref.hex
		for _, tc := range []struct{ name, key string }{
			{"leading slash", "/" + k},
			{"two leading slashes", "//" + k},
			{"leading dot segment", "./" + k},
			{"leading dot-dot segment", "x/../" + k},
			{"dot segment in the key", "blobs/./sha256/" + base},
			{"dot-dot segment in the key", dir + "/../sha256/" + base},
			{"empty segment in the key", "blobs//sha256/" + base},
			{"trailing dot segment", k + "/."},
			{"dot-dot as XML character references", "x/&#46;&#46;/" + k},
			{"percent-encoded dot-dot", "x/%2E%2E/" + k},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					doc, sum := deleteDoc(tc.key)
					return f.bob(http.MethodPost, "", url.Values{"delete": {""}}, doc, "Content-MD5", sum).must(t, f.hc)
				}, func(t *testing.T, _ answer) { f.checkRef(t) })
			})
		}
	})

	t.Run("copy source", func(t *testing.T) {
		// The content a copy must not bring into a blob key, stored
		// directly on MinIO.
		const evil = "evil/obj"
		if _, err := f.direct.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(evil), Body: bytes.NewReader(f.wrong)}); err != nil {
			t.Fatal(err)
		}
		sources := []struct{ name, source string }{
			{"plain", "/" + b + "/" + evil},
			{"without a leading slash", b + "/" + evil},
			{"dot-dot segment", "/" + b + "/x/../" + evil},
			{"dot segment", "/" + b + "/./" + evil},
			{"empty segment", "/" + b + "//" + evil},
			{"dot segment in the key", "/" + b + "/evil/./obj"},
			{"encoded slash", "/" + b + "/evil%2Fobj"},
			{"dot-dot between encoded slashes", "/" + b + "/x%2F..%2F" + evil},
			{"encoded dot-dot segment", "/" + b + "/x/%2E%2E/" + evil},
			{"dot segment before the bucket", "/./" + b + "/" + evil},
			{"dot-dot segment before the bucket", "/x/../" + b + "/" + evil},
			{"through the destination's digest", "/" + b + "/blobs/sha256/" + f.fresh.hex + "/../../../" + evil},
			{"through the referenced digest", "/" + b + "/blobs/sha256/" + f.ref.hex + "/../../../" + evil},
			{"through the referenced digest, encoded", "/" + b + "/blobs/sha256/" + f.ref.hex + "%2F..%2F..%2F..%2F" + evil},
		}
		for _, src := range sources {
			t.Run("CopyObject onto a referenced blob, "+src.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					return f.bob(http.MethodPut, f.ref.key, nil, nil, "X-Amz-Copy-Source", src.source).must(t, f.hc)
				}, func(t *testing.T, _ answer) { f.checkRef(t); f.checkNamespace(t) })
			})
			t.Run("CopyObject onto a new blob key, "+src.name, func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					return f.bob(http.MethodPut, f.fresh.key, nil, nil, "X-Amz-Copy-Source", src.source).must(t, f.hc)
				}, func(t *testing.T, _ answer) { f.checkNamespace(t) })
			})
		}
	})

	t.Run("afterwards", func(t *testing.T) {
		if got, found := f.get(t, f.ref.key); !found || !bytes.Equal(got, f.ref.body) {
			t.Errorf("the referenced blob on MinIO: found %v, %d bytes; want its %d bytes", found, len(got), len(f.ref.body))
		}
		f.checkNamespace(t)
	})
}

// pathSpelling is one way to spell a request's path: host, when set,
// addresses the bucket instead (virtual-hosted style).
type pathSpelling struct{ name, host, path string }

// rewrittenPaths spells /b/key in ways a backend that cleans paths reads
// as /b/key, the virtual-hosted ones through vhost.
func rewrittenPaths(b, vhost, key string) []pathSpelling {
	dir, base, _ := strings.Cut(key, "/")
	return []pathSpelling{
		{"empty segment before the key", "", "/" + b + "//" + key},
		{"dot segment before the key", "", "/" + b + "/./" + key},
		{"dot-dot segment before the key", "", "/" + b + "/x/../" + key},
		{"dot segment in the key", "", "/" + b + "/" + dir + "/./" + base},
		{"dot-dot segment in the key", "", "/" + b + "/" + dir + "/x/../" + base},
		{"empty segment in the key", "", "/" + b + "/" + dir + "//" + base},
		{"trailing dot segment", "", "/" + b + "/" + key + "/."},
		{"dot segment before the bucket", "", "/./" + b + "/" + key},
		{"dot-dot segment before the bucket", "", "/x/../" + b + "/" + key},
		{"empty segment before the bucket", "", "//" + b + "/" + key},
		{"encoded slash before the key", "", "/" + b + "/%2F" + key},
		{"encoded dot segment", "", "/" + b + "/%2E/" + key},
		{"encoded dot-dot segment", "", "/" + b + "/x/%2E%2E/" + key},
		{"lower-case encoded dot-dot segment", "", "/" + b + "/x/%2e%2e/" + key},
		{"dot-dot between encoded slashes", "", "/" + b + "/x%2F..%2F" + key},
		{"all encoded", "", "/" + b + "/x%2F%2E%2E%2F" + key},
		{"encoded dot segment before the bucket", "", "/%2E/" + b + "/" + key},
		{"virtual-hosted, empty segment before the key", vhost, "//" + key},
		{"virtual-hosted, dot-dot segment before the key", vhost, "/x/../" + key},
		{"virtual-hosted, encoded slash before the key", vhost, "/%2F" + key},
	}
}

// TestOneMeaningHopByHop: a request that names one of its end-to-end
// headers in Connection (x-amz-copy-source, content-length,
// x-amz-content-sha256, host), so that a proxy drops that header on the
// way to MinIO, is refused or executed as exactly what MinIO sees. The
// attack: a PUT with a body and a signed x-amz-copy-source of content that
// matches the blob key, which the gateway could verify as a copy while
// MinIO stores the body.
func TestOneMeaningHopByHop(t *testing.T) {
	t.Parallel()
	f := startOneMeaning(t)
	// Objects holding the right content for each destination, stored
	// directly: a copy from them is legitimate.
	for key, body := range map[string][]byte{"src/fresh": f.fresh.body, "src/ref": f.ref.body} {
		if _, err := f.direct.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	// put sends bob's PUT of body to key with the (signed) headers and
	// unsigned Connection headers, one line each. net/http sends them as
	// written.
	put := func(t *testing.T, key string, body []byte, connection []string, header ...string) answer {
		r := newRequest(t, http.MethodPut, objectURL(f.e.Endpoint, f.bucket, key), body)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		return f.sendAsBob(t, r, http.Header{"Connection": connection})
	}
	for _, connection := range [][]string{
		{"x-amz-copy-source"}, {"X-Amz-Copy-Source"}, {"close, x-amz-copy-source"}, {"keep-alive,x-amz-copy-source"},
		{"keep-alive", "x-amz-copy-source"},
		{"content-length"}, {"x-amz-content-sha256"}, {"host"},
	} {
		t.Run("Connection: "+strings.Join(connection, " + "), func(t *testing.T) {
			t.Run("copy onto a new blob key with a wrong body", func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					return put(t, f.fresh.key, f.wrong, connection, "X-Amz-Copy-Source", "/"+f.bucket+"/src/fresh")
				}, func(t *testing.T, _ answer) { f.checkNamespace(t) })
			})
			t.Run("copy onto a referenced blob with a wrong body", func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer {
					return put(t, f.ref.key, f.wrong, connection, "X-Amz-Copy-Source", "/"+f.bucket+"/src/ref")
				}, func(t *testing.T, _ answer) { f.checkRef(t); f.checkNamespace(t) })
			})
			t.Run("PutObject of a blob with a wrong body", func(t *testing.T) {
				f.attempt(t, func(t *testing.T) answer { return put(t, f.fresh.key, f.wrong, connection) },
					func(t *testing.T, _ answer) { f.checkNamespace(t) })
			})
		})
	}
	t.Run("afterwards", func(t *testing.T) {
		f.checkRef(t)
		f.checkNamespace(t)
	})
}

// TestOneMeaningPostPolicy: a browser-form upload (a multipart/form-data
// POST to the bucket with a policy signed by valid credentials, which MinIO
// would store) is refused with an S3 error that says what is not served,
// whoever signed it, and nothing is stored.
func TestOneMeaningPostPolicy(t *testing.T) {
	t.Parallel()
	f := startOneMeaning(t)
	for _, tc := range []struct {
		name string
		cred harness.Credential
		key  string
		// path is where the form goes; contentType its media type as sent.
		path, contentType string
	}{
		{"a blob key, signed with the backend's credentials", envCred(f.e), f.fresh.key, "/" + f.bucket + "/", "multipart/form-data"},
		{"a blob key, signed by alice", secAlice, f.fresh.key, "/" + f.bucket + "/", "multipart/form-data"},
		{"another key, signed with the backend's credentials", envCred(f.e), "forms/upload.txt", "/" + f.bucket, "multipart/form-data"},
		{"another key, media type in capitals", envCred(f.e), "forms/upload.txt", "/" + f.bucket + "/", "Multipart/Form-Data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := f.e.MinioGo(t, harness.WithCredentials(tc.cred.AccessKey, tc.cred.SecretKey))
			policy := minio.NewPostPolicy()
			for _, err := range []error{policy.SetBucket(f.bucket), policy.SetKey(tc.key), policy.SetExpires(time.Now().Add(time.Hour))} {
				if err != nil {
					t.Fatal(err)
				}
			}
			_, form, err := mc.PresignedPostPolicy(t.Context(), policy)
			if err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			w := multipart.NewWriter(&body)
			for _, k := range slices.Sorted(maps.Keys(form)) {
				if err := w.WriteField(k, form[k]); err != nil {
					t.Fatal(err)
				}
			}
			part, err := w.CreateFormFile("file", "upload.bin")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := part.Write(f.wrong); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			before := len(f.proxy.Requests())
			req := newRequest(t, http.MethodPost, f.e.Endpoint+tc.path, body.Bytes())
			req.Header.Set("Content-Type", tc.contentType+"; boundary="+w.Boundary())
			resp := do(t, f.hc, req)
			e, raw, err := harness.ReadS3Error(resp)
			switch {
			case err != nil:
				t.Errorf("%s: not an S3 error (%v); body:\n%s", resp.Status, err, raw)
			case resp.StatusCode < 400 || (resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented):
				t.Errorf("%s %s (%s): want a refusal", resp.Status, e.Code, e.Message)
			case !strings.Contains(strings.ToLower(e.Message), "post") && !strings.Contains(strings.ToLower(e.Message), "form"):
				t.Errorf("%d %s (%s): the error does not say that form uploads are not served", resp.StatusCode, e.Code, e.Message)
			default:
				t.Logf("%d %s: %s", resp.StatusCode, e.Code, e.Message)
			}
			if resp.Header.Get("X-Amz-Request-Id") == "" {
				t.Errorf("%s without an X-Amz-Request-Id", resp.Status)
			}
			if _, found := f.get(t, tc.key); found {
				t.Errorf("MinIO stored %s from the form", tc.key)
			}
			if got := slices.DeleteFunc(f.proxy.Requests()[before:], func(r harness.ProxiedRequest) bool {
				return r.Method != http.MethodPost || !strings.HasPrefix(r.Path, "/"+f.bucket)
			}); len(got) != 0 {
				t.Errorf("the form upload reached MinIO:\n  %s", describeProxied(got))
			}
		})
	}
	f.checkNamespace(t)
}
