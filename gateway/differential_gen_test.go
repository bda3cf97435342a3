//go:build integration

package gateway

// The differential suite's request generator: the requests it sends, drawn
// from one seed, aimed at the world's targets with tricks that could give a
// request a second meaning.

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sweepgate/sweepgate/backend"
)

// diffGen generates requests from a seeded source.
type diffGen struct {
	w    *diffWorld
	rng  *rand.Rand
	n    int
	apis []diffAPI
	// control names the parameters of the request being drawn whose
	// values were given a control character.
	control []string
}

func diffPick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// diffTarget is a key the generator aims at.
type diffTarget struct {
	name, bucket, key string
	protected         *diffProtected
	blob              bool
	content           []byte // a body it may be written with
}

func (g *diffGen) targets() []diffTarget {
	w := g.w
	return []diffTarget{
		{name: "plain", bucket: diffPlainBucket, key: "obj"},
		{name: "plain", bucket: diffPlainBucket, key: "dir/obj"},
		{name: "plain", bucket: diffPlainBucket, key: "ünï/cødé.txt"},
		{name: "plain-new", bucket: diffPlainBucket, key: "gen/new"},
		{name: "own-upload", bucket: diffPlainBucket, key: diffMineKey},
		{name: "protected-upload", bucket: diffRegBucket, key: diffUploadKey},
		{name: "protected-upload", bucket: diffRegBucket, key: diffUploadKey},
		{name: "referenced-blob", bucket: diffRegBucket, key: w.refBlob.key, protected: w.refBlob, blob: true, content: w.refBlob.body},
		{name: "referenced-blob", bucket: diffRegBucket, key: w.refBlob.key, protected: w.refBlob, blob: true, content: w.refBlob.body},
		{name: "guarded-blob", bucket: diffRegBucket, key: w.guardBlob.key, protected: w.guardBlob, blob: true, content: w.guardBlob.body},
		{name: "free-blob", bucket: diffRegBucket, key: w.freeBlobKey, blob: true},
		{name: "manifest", bucket: diffRegBucket, key: w.manifest.key, protected: w.manifest, content: w.manifest.body},
		{name: "manifest", bucket: diffRegBucket, key: w.manifest.key, protected: w.manifest, content: w.manifest.body},
		{name: "manifest-new", bucket: diffRegBucket, key: diffSourcePrefix + "gen/new"},
		{name: "missing-bucket", bucket: diffMissingBucket, key: "obj"},
		{name: "witness", bucket: diffPlainBucket, key: w.witness.key, protected: w.witness, content: w.witness.body},
		{name: "witness", bucket: diffPlainBucket, key: w.witness.key, protected: w.witness, content: w.witness.body},
		// Prefixes of the protected keys, for what would act on a whole
		// prefix (x-minio-force-delete).
		{name: "prefix", bucket: diffRegBucket, key: "blobs/sha256"},
		{name: "prefix", bucket: diffRegBucket, key: "manifests"},
	}
}

// shapeKey writes the target's key in one of the shapes clients and
// attackers use, and returns the shape's name, the decoded key and the key
// as sent.
func (g *diffGen) shapeKey(t diffTarget) (shape, key, raw string) {
	k := t.key
	switch shape = diffPick(g.rng, []string{
		"canonical", "canonical", "canonical", "canonical", "canonical", "canonical",
		"leading-slash", "double-slash", "dot", "dot-dot", "encoded-dot-dot", "encoded-slash",
		"upper-hex", "unicode", "trailing-slash", "backslash-dot-dot", "nul",
	}); shape {
	case "canonical":
		return shape, k, backend.EscapePath(k)
	case "leading-slash":
		k = "/" + k
	case "double-slash":
		if i := strings.LastIndex(k, "/"); i >= 0 {
			k = k[:i] + "/" + k[i:]
		} else {
			k = "x//" + k
		}
	case "dot":
		if i := strings.LastIndex(k, "/"); i >= 0 {
			k = k[:i] + "/." + k[i:]
		} else {
			k = "./" + k
		}
	case "dot-dot", "encoded-dot-dot":
		i := strings.LastIndex(k, "/")
		k = k[:i+1] + "x/../" + k[i+1:]
		if shape == "encoded-dot-dot" {
			return shape, k, strings.ReplaceAll(backend.EscapePath(k), "/../", "/%2E%2E/")
		}
	case "encoded-slash":
		return shape, k, strings.ReplaceAll(backend.EscapePath(k), "/", "%2F")
	case "upper-hex":
		if !t.blob {
			return "canonical", k, backend.EscapePath(k)
		}
		k = diffBlobPrefix + strings.ToUpper(strings.TrimPrefix(k, diffBlobPrefix))
	case "unicode":
		k += "-é"
	case "trailing-slash":
		k += "/"
	case "nul":
		k += "\x00x"
	case "backslash-dot-dot":
		i := strings.LastIndex(k, "/")
		k = k[:i+1] + `x\..\` + k[i+1:]
	}
	return shape, k, backend.EscapePath(k)
}

func diffBadKey(key string) bool {
	if strings.HasPrefix(key, "/") || strings.Contains(key, "//") {
		return true
	}
	for _, s := range strings.FieldsFunc(key, func(r rune) bool { return r == '/' || r == '\\' }) {
		if s == "." || s == ".." {
			return true
		}
	}
	return false
}

// diffBadCopySource reports whether an x-amz-copy-source is not of the
// form /BUCKET/KEY[?versionId=ID] (the leading "/" optional) with a key
// diffBadKey accepts.
func diffBadCopySource(src string) bool {
	if strings.HasPrefix(src, "//") {
		return true
	}
	p, rawQuery, _ := strings.Cut(strings.TrimPrefix(src, "/"), "?")
	bucket, key, ok := strings.Cut(p, "/")
	dec, err := url.PathUnescape(key)
	if !ok || bucket == "" || key == "" || err != nil || diffBadKey(dec) {
		return true
	}
	if rawQuery == "" {
		return false
	}
	q, err := url.ParseQuery(rawQuery)
	return err != nil || len(q) != 1 || !q.Has("versionId")
}

// diffWellFormedWrite reports whether a request is an ordinary write or
// delete of its object (PutObject, CopyObject, DeleteObject, or the
// complete of an upload): legitimate for ordinary principals, so never
// sent to a writable protected object.
func diffWellFormedWrite(method string, names []string) bool {
	// x-id and the x-amz-* headers a presigning SDK hoists into the query
	// leave a write a write.
	rest := slices.DeleteFunc(slices.Clone(names), func(n string) bool {
		return n == "versionId" || n == "x-id" || strings.HasPrefix(strings.ToLower(n), "x-amz-")
	})
	switch method {
	case http.MethodPut, http.MethodDelete:
		return len(rest) == 0
	case http.MethodPost:
		return len(rest) == 1 && rest[0] == "uploadId"
	}
	return false
}

// next generates one request: three times in five an S3 API request as
// the documentation defines it, perhaps with one thing changed (a
// parameter added, a copy source added, the key reshaped, the method
// swapped), otherwise a method, target and parameters drawn at random.
func (g *diffGen) next() *diffRequest {
	g.n++
	q := &diffRequest{n: g.n, header: http.Header{}}
	api, tweak := g.drawMethod(q)
	t := g.drawTarget(q, api, tweak)
	g.control = nil
	names, query := g.drawQuery(api, tweak, t)
	q.rawQuery = strings.Join(query, "&")
	q.control = g.control
	if api == nil && g.rng.IntN(5) == 0 || tweak == "trick" {
		g.trick(q, query)
	}
	if api != nil && tweak == "" {
		q.listing = api.listing()
	}
	g.drawCopySource(q, api, tweak)
	g.drawHeaders(q, api)

	q.body = g.body(q, t, names)
	if len(q.body) > 0 && (slices.Contains(names, "delete") || g.rng.IntN(3) == 0) {
		sum := md5.Sum(q.body)
		q.header.Set("Content-Md5", base64.StdEncoding.EncodeToString(sum[:]))
	}

	// A writable protected object gets no well-formed write in a shape
	// that names it.
	if t.protected != nil && t.protected.writable && (q.shape == "canonical" || q.shape == "encoded-slash") && diffWellFormedWrite(q.method, names) {
		g.n--
		return g.next()
	}
	return q
}

// drawMethod sets q's method: three times in five an S3 API's, which it
// returns with the one thing to change in it, if any (tweak); otherwise
// one drawn at random.
func (g *diffGen) drawMethod(q *diffRequest) (api *diffAPI, tweak string) {
	rng := g.rng
	if rng.IntN(5) < 3 {
		a := diffPick(rng, g.apis)
		api = &a
		q.method = api.method
		if rng.IntN(4) == 0 {
			tweak = diffPick(rng, []string{"param", "param", "copy", "shape", "method", "trick"})
		}
		if tweak == "method" {
			q.method = diffPick(rng, []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete})
		}
	} else {
		q.method = diffPick(rng, []string{
			http.MethodGet, http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPut, http.MethodPut,
			http.MethodPost, http.MethodPost, http.MethodDelete, http.MethodDelete, http.MethodDelete,
			http.MethodOptions, http.MethodPatch,
		})
	}
	return api, tweak
}

// drawTarget sets q's target, path and key shape: the API's kind of
// target, or one drawn at random, reshaped where the API is not followed.
func (g *diffGen) drawTarget(q *diffRequest, api *diffAPI, tweak string) diffTarget {
	rng := g.rng
	var t diffTarget
	kind := "object"
	switch r := rng.IntN(100); {
	case api != nil:
		kind = api.target
	case r < 5:
		kind = "service"
	case r < 30:
		kind = "bucket"
	}
	switch kind {
	case "service":
		q.target, q.shape, q.path, q.rawPath = "service", "-", "/", "/"
	case "bucket":
		b := diffPick(rng, []string{diffPlainBucket, diffRegBucket, diffRegBucket, diffMissingBucket})
		q.target, q.shape, q.path = "bucket "+b, "-", "/"+b
		if rng.IntN(10) == 0 {
			q.path += "/"
			q.shape = "trailing-slash"
		}
		q.rawPath = q.path
	default:
		t = diffPick(rng, g.targets())
		shape, key, raw := "canonical", t.key, backend.EscapePath(t.key)
		if api == nil || tweak == "shape" {
			shape, key, raw = g.shapeKey(t)
		}
		q.target, q.shape = t.name, shape
		q.path, q.rawPath = "/"+t.bucket+"/"+key, "/"+t.bucket+"/"+raw
		q.badKey = diffBadKey(key)
	}
	return t
}

// drawQuery draws q's query parameters: the API's selectors and some of
// its optional ones (one more at random for the "param" tweak), or random
// ones. It returns their names and the encoded name=value pairs.
func (g *diffGen) drawQuery(api *diffAPI, tweak string, t diffTarget) (names, query []string) {
	rng := g.rng
	addValue := func(name, v string) {
		if slices.Contains(names, name) {
			return
		}
		names = append(names, name)
		switch v {
		case "@upload":
			v = g.w.uploadID
			if t.name == "own-upload" {
				v = g.w.mineID
			}
		case "@mine":
			v = g.w.mineID
		}
		// A control character, in a listing's filters most often (where
		// the gateway must pass it) and in any other parameter (where it
		// must refuse it: the router may not see the parameter).
		if diffIsListingFilter(name) && rng.IntN(2) == 0 || rng.IntN(12) == 0 {
			c := diffPick(rng, diffControls)
			switch rng.IntN(3) {
			case 0:
				v = c
			case 1:
				v += c
			default:
				v = c + v + c
			}
			g.control = append(g.control, name)
		}
		if v == "" && rng.IntN(2) == 0 {
			query = append(query, url.QueryEscape(name))
		} else {
			query = append(query, url.QueryEscape(name)+"="+url.QueryEscape(v))
		}
	}
	add := func(p diffParam) {
		v := ""
		if len(p.values) > 0 {
			v = diffPick(rng, p.values)
		}
		addValue(p.name, v)
	}
	randomParam := func() {
		switch r := rng.IntN(10); {
		case r < 3:
			add(diffParamNamed(diffPick(rng, diffMultipartParams)))
		case r < 8:
			add(diffPick(rng, diffParams))
		default:
			add(diffPick(rng, diffOrdinaryParams))
		}
	}
	if api != nil {
		for _, s := range api.selector {
			if name, v, ok := strings.Cut(s, "="); ok {
				addValue(name, v)
			} else {
				add(diffParamNamed(s))
			}
		}
		for _, o := range api.optional {
			if rng.IntN(4) == 0 {
				add(diffParamNamed(o))
			}
		}
		if tweak == "param" {
			randomParam()
		}
	} else {
		for range diffPick(rng, []int{0, 0, 1, 1, 1, 1, 2, 2, 2, 3}) {
			randomParam()
		}
		if t.name == "protected-upload" && rng.IntN(2) == 0 {
			// Most requests at the protected upload name it.
			add(diffParamNamed("uploadId"))
		}
	}
	return names, query
}

// drawCopySource gives q a copy source: where the API takes one, on a third
// of the other PUTs drawn at random, and now and then anywhere.
func (g *diffGen) drawCopySource(q *diffRequest, api *diffAPI, tweak string) {
	rng := g.rng
	if (api != nil && (api.copy || tweak == "copy")) || (api == nil && (q.method == http.MethodPut && rng.IntN(3) == 0 || rng.IntN(25) == 0)) {
		sources := []string{
			"/" + diffPlainBucket + "/obj", diffPlainBucket + "/dir/obj", "/" + diffPlainBucket + "/dir%2Fobj",
			"/" + diffRegBucket + "/" + g.w.freeBlobKey, "/" + diffRegBucket + "/" + g.w.manifest.key,
			"/" + diffRegBucket + "/" + g.w.refBlob.key, "/" + diffPlainBucket + "/obj?versionId=null",
		}
		if api == nil || rng.IntN(3) == 0 {
			sources = append(sources,
				"/"+diffPlainBucket+"/obj?versionId=null&x-id=CopyObject", "//"+diffPlainBucket+"/obj",
				diffPlainBucket+"obj", "/"+diffPlainBucket+"//obj", "/"+diffPlainBucket+"/./obj",
				"/"+diffPlainBucket+"/x/../obj", "/"+diffPlainBucket, "/"+diffPlainBucket+"/obj#x")
		}
		src := diffPick(rng, sources)
		q.header.Set("X-Amz-Copy-Source", src)
		q.badCopySource = diffBadCopySource(src)
	}
}

// drawHeaders adds the headers of q's trick, and to a request off the APIs
// now and then a header that changes what MinIO does with it.
func (g *diffGen) drawHeaders(q *diffRequest, api *diffAPI) {
	rng := g.rng
	switch q.trick {
	case "connection":
		q.header.Set("Connection", diffPick(rng, []string{"X-Amz-Copy-Source", "keep-alive, X-Amz-Copy-Source",
			"X-Amz-Content-Sha256", "Authorization", "Content-Md5", "close", "keep-alive"}))
	case "two-copy-sources":
		q.header.Add("X-Amz-Copy-Source", "/"+diffRegBucket+"/"+g.w.refBlob.key)
		q.header.Add("X-Amz-Copy-Source", "/"+diffPlainBucket+"/obj")
		q.badCopySource = true
	}
	if api == nil {
		switch r := rng.IntN(100); {
		case r < 3:
			q.header.Set("X-Amz-Meta-Snowball-Auto-Extract", "true")
		case r < 5:
			q.header.Set("X-Amz-Write-Offset-Bytes", "0")
		case r < 7 && q.method == http.MethodPost:
			q.header.Set("Content-Type", "multipart/form-data; boundary=xyz")
		case r < 9:
			q.header.Set("X-Minio-Force-Delete", "true")
		}
	}
}

// trick gives q one of the oddities by which a request could mean one
// thing to the gateway and another to the backend: a repeated, encoded,
// miscased or ';'-separated query parameter, a lower-case method, a
// Connection header naming another header, two copy sources, or a
// presigned URL instead of a signed header.
func (g *diffGen) trick(q *diffRequest, query []string) {
	rng := g.rng
	q.trick = diffPick(rng, []string{"repeat-param", "encoded-name", "semicolon", "case-name", "lower-method",
		"connection", "two-copy-sources", "presigned", "presigned"})
	switch q.trick {
	case "repeat-param":
		if len(query) == 0 {
			query = []string{"uploadId=" + url.QueryEscape(g.w.mineID)}
		}
		name, _, _ := strings.Cut(query[0], "=")
		query = append(query, name+"="+diffPick(rng, []string{"", "bogus", url.QueryEscape(g.w.uploadID)}))
		q.rawQuery = strings.Join(query, "&")
	case "encoded-name":
		if len(query) == 0 {
			query = []string{"uploadId=" + url.QueryEscape(g.w.uploadID)}
		}
		i := rng.IntN(len(query))
		query[i] = fmt.Sprintf("%%%02X", query[i][0]) + query[i][1:]
		q.rawQuery = strings.Join(query, "&")
	case "semicolon":
		if len(query) < 2 {
			query = append(query, "uploadId="+url.QueryEscape(g.w.uploadID))
		}
		q.rawQuery = strings.Join(query, ";")
	case "case-name":
		if len(query) == 0 {
			query = []string{"UploadId=" + url.QueryEscape(g.w.uploadID)}
		} else {
			i := rng.IntN(len(query))
			query[i] = strings.ToUpper(query[i][:1]) + query[i][1:]
		}
		q.rawQuery = strings.Join(query, "&")
	case "lower-method":
		q.method = strings.ToLower(q.method)
	case "presigned":
		q.presign = true
	}
}

// body returns a small body that fits the request.
func (g *diffGen) body(q *diffRequest, t diffTarget, names []string) []byte {
	rng := g.rng
	has := func(n string) bool { return slices.Contains(names, n) }
	switch {
	case q.method == http.MethodPost && has("delete"):
		body, bad := g.deleteBody()
		q.badBodyKey = bad
		return body
	case q.method == http.MethodPost && has("uploadId"):
		return []byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"0cc175b9c0f1b6a831c399e269772661"</ETag></Part></CompleteMultipartUpload>`)
	case q.method == http.MethodPut && has("tagging"):
		return []byte(`<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>`)
	case q.method == http.MethodPost && has("select"):
		return []byte(`<SelectObjectContentRequest><Expression>select * from s3object</Expression><ExpressionType>SQL</ExpressionType><InputSerialization><CSV/></InputSerialization><OutputSerialization><CSV/></OutputSerialization></SelectObjectContentRequest>`)
	case q.method == http.MethodPut && q.header.Get("X-Amz-Copy-Source") == "" && len(names) == 0 || q.method == http.MethodPut && has("partNumber"):
		switch {
		case t.content != nil && rng.IntN(2) == 0:
			return t.content
		case strings.HasPrefix(t.key, diffSourcePrefix) || t.name == "manifest-new":
			d := g.w.refDigest
			if rng.IntN(2) == 0 {
				d = g.w.guardDigest
			}
			return fmt.Appendf(nil, `{"layers":[{"digest":%q}]}`, d)
		}
		return fmt.Appendf(nil, "generated body %d", rng.IntN(1000))
	case q.method == http.MethodPut || q.method == http.MethodPost:
		if rng.IntN(2) == 0 {
			return []byte(`<Configuration><Status>Enabled</Status></Configuration>`)
		}
	}
	return nil
}

// deleteBody is a DeleteObjects document naming protected keys in
// variant forms and ordinary keys; bad reports whether a key is one
// diffBadKey refuses.
func (g *diffGen) deleteBody() (body []byte, bad bool) {
	w, rng := g.w, g.rng
	ref, guard, man := w.refBlob.key, w.guardBlob.key, w.manifest.key
	variants := []string{
		ref, ref, "/" + ref, strings.Replace(ref, "/sha256/", "//sha256/", 1), strings.Replace(ref, "/sha256/", "/./sha256/", 1),
		strings.Replace(ref, "/sha256/", "/x/../sha256/", 1), diffBlobPrefix + strings.ToUpper(strings.TrimPrefix(ref, diffBlobPrefix)),
		ref + "/", "/" + man, strings.Replace(man, "/app/", "//app/", 1), strings.Replace(man, "/app/", "/./app/", 1),
		strings.Replace(man, "/app/", "/x/../app/", 1), "/" + guard, strings.Replace(guard, "/sha256/", "/./sha256/", 1),
		diffUploadKey, "gen/new", "obj", w.freeBlobKey,
	}
	var b strings.Builder
	b.WriteString("<Delete>")
	if rng.IntN(2) == 0 {
		b.WriteString("<Quiet>true</Quiet>")
	}
	for range 1 + rng.IntN(4) {
		k := diffPick(rng, variants)
		bad = bad || diffBadKey(k)
		var esc bytes.Buffer
		_ = diffXMLEscape(&esc, k)
		fmt.Fprintf(&b, "<Object><Key>%s</Key></Object>", esc.String())
	}
	b.WriteString("</Delete>")
	return []byte(b.String()), bad
}

func diffXMLEscape(w io.Writer, s string) error {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	_, err := r.WriteString(w, s)
	return err
}
