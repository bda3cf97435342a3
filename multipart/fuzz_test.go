package multipart

import (
	"errors"
	"testing"

	"github.com/sweepgate/sweepgate/s3err"
)

// FuzzParseComplete feeds hostile CompleteMultipartUpload bodies to the
// parser: it must not panic, must answer only with S3 errors a client can
// act on, and whatever it accepts must be a non-empty list of parts in
// range and in ascending order with an ETag each, from which the parts
// digest and the expected ETag can be computed.
func FuzzParseComplete(f *testing.F) {
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"d41d8cd98f00b204e9800998ecf8427e"</ETag></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><ETag>a</ETag><PartNumber>10000</PartNumber></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>x</ETag></Part><Part><PartNumber>1</PartNumber><ETag>y</ETag></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<!DOCTYPE x [<!ENTITY a "aaaa">]><CompleteMultipartUpload><Part><PartNumber>&a;</PartNumber></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>99999999999999999999</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		parts, err := parseComplete(body)
		if err != nil {
			var s3e *s3err.Error
			if !errors.As(err, &s3e) || s3e.HTTPStatus != 400 {
				t.Fatalf("error %v is not a 400 S3 error", err)
			}
			return
		}
		if len(parts) == 0 {
			t.Fatal("accepted an empty part list")
		}
		for i, p := range parts {
			if p.PartNumber < 1 || p.PartNumber > maxPartNumber || unquote(p.ETag) == "" && p.ETag == "" {
				t.Fatalf("accepted part %+v", p)
			}
			if i > 0 && p.PartNumber <= parts[i-1].PartNumber {
				t.Fatalf("accepted parts out of order: %+v", parts)
			}
		}
		if partsDigest(parts) == "" {
			t.Fatal("no parts digest")
		}
		_ = multipartETag(parts)
	})
}
