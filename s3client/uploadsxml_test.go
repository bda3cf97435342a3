package s3client_test

import (
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/s3client"
)

// xmlListing decodes a listing as the client did before it had its own
// decoder, and still does for an answer that decoder does not take.
func xmlListing(doc string) (*s3client.ListingResult, error) {
	var res struct {
		XMLName xml.Name `xml:"ListMultipartUploadsResult"`
		s3client.ListingResult
	}
	err := xml.NewDecoder(strings.NewReader(doc)).Decode(&res)
	return &res.ListingResult, err
}

// checkListing is the oracle: whatever the client's decoder takes,
// encoding/xml takes too and decodes to the same result. plain says the
// document keeps to the XML that decoder is meant to take.
func checkListing(t *testing.T, doc string, plain bool) (taken bool) {
	t.Helper()
	got, ok, err := s3client.DecodeUploadListing(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("reading a string failed: %v", err)
	}
	want, wantErr := xmlListing(doc)
	switch {
	case ok && wantErr != nil:
		t.Fatalf("decoded %q, which encoding/xml refuses (%v)", doc, wantErr)
	case ok && !reflect.DeepEqual(got, want):
		t.Fatalf("decoded %q\nas   %+v\nwant %+v", doc, got, want)
	case !ok && plain:
		t.Fatalf("did not decode the plain document %q", doc)
	}
	return ok
}

// TestUploadListingOracle compares the listing decoder with encoding/xml
// over generated documents: plain ones it must decode as encoding/xml
// does, ones with what it leaves to encoding/xml (comments, CDATA,
// carriage returns, prefixes, ...) and randomly damaged ones, which it
// must decode as encoding/xml does or leave alone.
func TestUploadListingOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var plainTaken, otherTaken, other int
	for i := range 20000 {
		g := &listingGen{r: r, plain: true, withOdd: i%3 == 0}
		doc := g.document()
		plain := g.plain
		if i%4 == 0 {
			doc, plain = mutate(r, doc), false
		}
		if checkListing(t, doc, plain) {
			if plain {
				plainTaken++
			} else {
				otherTaken++
			}
		}
		if !plain {
			other++
		}
	}
	t.Logf("%d plain documents decoded; %d of %d others decoded, the rest left to encoding/xml", plainTaken, otherTaken, other)
	if plainTaken < 6000 || other < 3000 || otherTaken == 0 {
		t.Errorf("the generator made %d plain documents and %d others (%d decoded): too few of one kind", plainTaken, other, otherTaken)
	}
}

// TestUploadListingCases are documents the decoder must leave to
// encoding/xml or must decode as it does, written out.
func TestUploadListingCases(t *testing.T) {
	const root = `<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`
	for _, c := range []struct {
		doc   string
		plain bool
	}{
		{root + `<Upload><Key>a&amp;b&#x41;&#66;</Key></Upload></ListMultipartUploadsResult>`, true},
		{root + `<IsTruncated>true</IsTruncated><IsTruncated/></ListMultipartUploadsResult>`, true},
		{root + `<Upload><Key>a</Key><Key>b</Key></Upload><Upload/></ListMultipartUploadsResult>trailing <junk`, true},
		{`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + root + `</ListMultipartUploadsResult>`, true},
		{root + `<Upload><Owner><Upload><Key>x</Key></Upload></Owner><Key>k</Key></Upload></ListMultipartUploadsResult>`, true},
		{root + `<Upload><Key>a<!-- c -->b</Key></Upload></ListMultipartUploadsResult>`, false},
		{root + `<Upload><Key><![CDATA[a<b]]></Key></Upload></ListMultipartUploadsResult>`, false},
		{root + "<Upload><Key>a\r\nb</Key></Upload></ListMultipartUploadsResult>", false},
		{root + `<Upload><Key>a]]>b</Key></Upload></ListMultipartUploadsResult>`, false},
		{root + `<Upload><Key>a<i/>b</Key></Upload></ListMultipartUploadsResult>`, false},
		{root + `<s3:Upload xmlns:s3="x"><Key>k</Key></s3:Upload></ListMultipartUploadsResult>`, false},
		{root + `<IsTruncated> true</IsTruncated></ListMultipartUploadsResult>`, false},
		{root + `<IsTruncated>1</IsTruncated></ListMultipartUploadsResult>`, false},
		{root + `<Upload><Key>&#0;&#xD800;</Key></Upload></ListMultipartUploadsResult>`, false},
		{root + `<Upload><Key>&nbsp;</Key></Upload></ListMultipartUploadsResult>`, false},
		{root + `<Upload><Key>a</Upload></Key></ListMultipartUploadsResult>`, false},
		{root + `<Upload><Key>a</Key></Upload>`, false},
		{`<?xml version="1.1"?>` + root + `</ListMultipartUploadsResult>`, false},
		{`<?xml version="1.0" encoding="ISO-8859-1"?>` + root + `</ListMultipartUploadsResult>`, false},
		{`<Error><Code>InternalError</Code></Error>`, false},
		{"\ufeff" + root + `</ListMultipartUploadsResult>`, false},
		{"<ListMultipartUploadsResult a='1'b='2'></ListMultipartUploadsResult>", false},
		{"<ListMultipartUploadsResult a = '1' b=\"&amp;\"></ListMultipartUploadsResult>", false},
		{"<ListMultipartUploadsResult a = '1' xmlns:b=\"2\" ></ListMultipartUploadsResult >", true},
		{root + "<Upload><Key>\xff</Key></Upload></ListMultipartUploadsResult>", false},
	} {
		checkListing(t, c.doc, c.plain)
	}
}

// FuzzUploadListing runs the oracle over arbitrary documents.
func FuzzUploadListing(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		f.Add((&listingGen{r: r, plain: true, withOdd: true}).document())
	}
	f.Fuzz(func(t *testing.T, doc string) {
		checkListing(t, doc, false)
	})
}

// listingGen writes a random ListMultipartUploadsResult document. plain
// turns false when it writes something outside the decoder's plain XML;
// withOdd lets it.
type listingGen struct {
	r       *rand.Rand
	b       strings.Builder
	plain   bool
	withOdd bool
}

func (g *listingGen) chance(p float64) bool { return g.r.Float64() < p }

// odd writes s, which is outside the plain XML, when odd things are
// allowed, and reports whether it did.
func (g *listingGen) odd(p float64, s string) bool {
	if !g.withOdd || !g.chance(p) {
		return false
	}
	g.b.WriteString(s)
	g.plain = false
	return true
}

func (g *listingGen) space() {
	for range g.r.IntN(3) {
		g.b.WriteByte(" \t\n"[g.r.IntN(3)])
	}
}

func (g *listingGen) document() string {
	if g.chance(0.7) {
		g.b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>`)
		g.space()
	}
	g.odd(0.02, "<!-- prolog -->")
	g.b.WriteString("<ListMultipartUploadsResult")
	if g.chance(0.8) {
		g.b.WriteString(` xmlns="http://s3.amazonaws.com/doc/2006-03-01/"`)
	}
	if g.chance(0.1) {
		g.b.WriteString(` xmlns:s3 = 'x'`)
	}
	g.space()
	g.b.WriteString(">")
	fields := []func(){
		func() { g.field("Bucket", g.text()) },
		func() { g.field("KeyMarker", g.text()) },
		func() { g.field("NextKeyMarker", g.text()) },
		func() { g.field("NextUploadIdMarker", g.text()) },
		func() { g.field("MaxUploads", "1000") },
		func() { g.field("EncodingType", []string{"url", "", "URL"}[g.r.IntN(3)]) },
		func() {
			v := []string{"true", "false", ""}[g.r.IntN(3)]
			if g.withOdd && g.chance(0.1) {
				v, g.plain = []string{" true", "1", "TRUE", "yes"}[g.r.IntN(4)], false
			}
			g.field("IsTruncated", v)
		},
		func() { g.unknown(0) },
		func() { g.upload() },
		func() { g.upload() },
		func() { g.upload() },
	}
	for range g.r.IntN(12) {
		fields[g.r.IntN(len(fields))]()
		if g.chance(0.2) {
			g.b.WriteString(g.text())
		}
	}
	g.b.WriteString("</ListMultipartUploadsResult")
	g.space()
	g.b.WriteString(">")
	if g.chance(0.1) {
		g.b.WriteString("<after/>& junk")
	}
	return g.b.String()
}

func (g *listingGen) upload() {
	g.b.WriteString("<Upload")
	if g.chance(0.05) {
		g.b.WriteString("/>")
		return
	}
	g.b.WriteString(">")
	parts := []func(){
		func() { g.field("Key", g.text()) },
		func() { g.field("UploadId", g.text()) },
		func() { g.field("Initiated", "2026-12-01T10:00:00.000Z") },
		func() { g.field("StorageClass", "STANDARD") },
		func() { g.unknown(0) },
	}
	for _, i := range g.r.Perm(len(parts)) {
		parts[i]()
		if g.chance(0.1) {
			parts[g.r.IntN(len(parts))]()
		}
	}
	g.b.WriteString("</Upload>")
}

// field writes an element holding text (already escaped).
func (g *listingGen) field(name, text string) {
	if text == "" && g.chance(0.3) {
		g.b.WriteString("<" + name + "/>")
		return
	}
	g.b.WriteString("<" + name + ">")
	g.b.WriteString(text)
	switch {
	case g.odd(0.01, "<!-- c -->"):
	case g.odd(0.01, "<i>x</i>"):
	case g.odd(0.01, "<![CDATA[<x>]]>"):
	}
	g.b.WriteString("</" + name)
	g.space()
	g.b.WriteString(">")
}

// unknown writes an element the result has no field for, with elements
// inside named like the ones it has.
func (g *listingGen) unknown(depth int) {
	names := []string{"Owner", "ID", "DisplayName", "CommonPrefixes", "x.y-z_1", "Upload", "Key"}
	if depth == 0 {
		names = names[:len(names)-2]
	}
	name := names[g.r.IntN(len(names))]
	g.b.WriteString("<" + name)
	if g.chance(0.2) {
		g.b.WriteString(` a="1"`)
	}
	if g.chance(0.2) {
		g.b.WriteString("/>")
		return
	}
	g.b.WriteString(">")
	for range g.r.IntN(3) {
		if depth < 3 && g.chance(0.5) {
			g.unknown(depth + 1)
		} else {
			g.b.WriteString(g.text())
		}
	}
	g.odd(0.02, "<?pi x?>")
	g.b.WriteString("</" + name + ">")
}

// text returns random escaped character data.
func (g *listingGen) text() string {
	var t strings.Builder
	alphabet := []rune("abcXYZ019 %/._-+&<>\"'\t\né日\U0001F600\u00a0\u007f")
	for range g.r.IntN(12) {
		c := alphabet[g.r.IntN(len(alphabet))]
		switch {
		case c == '<':
			t.WriteString([]string{"&lt;", "&#60;", "&#x3c;", "&#x3C;"}[g.r.IntN(4)])
		case c == '&':
			t.WriteString([]string{"&amp;", "&#38;"}[g.r.IntN(2)])
		case c == '>' && g.withOdd && g.chance(0.2):
			t.WriteString("]]>")
			g.plain = false
		case c == '>':
			t.WriteString("&gt;")
		case c == '\n' && g.withOdd && g.chance(0.1):
			t.WriteString("\r\n")
			g.plain = false
		case g.chance(0.1):
			t.WriteString(fmt.Sprintf("&#x%X;", c))
		case g.chance(0.1):
			t.WriteString(fmt.Sprintf("&#%d;", c))
		default:
			t.WriteRune(c)
		}
	}
	if g.withOdd && g.chance(0.01) {
		t.WriteString([]string{"&nbsp;", "&#0;", "&#xD800;", "&#X41;", "\x01", "\xff", "&amp"}[g.r.IntN(7)])
		g.plain = false
	}
	return t.String()
}

// mutate damages doc at a random place.
func mutate(r *rand.Rand, doc string) string {
	if doc == "" {
		return doc
	}
	i := r.IntN(len(doc))
	switch r.IntN(4) {
	case 0:
		return doc[:i] + doc[i+1:]
	case 1:
		return doc[:i] + string("<>&;/\"'=!?[]x# \r\n\t:"[r.IntN(19)]) + doc[i:]
	case 2:
		j := min(len(doc), i+1+r.IntN(20))
		return doc[:i] + doc[i:j] + doc[i:]
	}
	return doc[:i]
}

// BenchmarkUploadListing decodes a listing of 10,000 uploads as MinIO
// writes it, with the client's decoder and with encoding/xml.
func BenchmarkUploadListing(b *testing.B) {
	var doc strings.Builder
	doc.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker><NextKeyMarker></NextKeyMarker><NextUploadIdMarker></NextUploadIdMarker><EncodingType>url</EncodingType><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>`)
	for i := range 10000 {
		fmt.Fprintf(&doc, "<Upload><Key>obj%%2F%06d</Key><UploadId>NDQ0ZjM4YzQtZWQ5Ny00ZjE1LWE3YzMtOGUxOWQ5ZjNhZTI0LjE1ZDE4NjA2LTg2%06dx</UploadId><Initiator><ID>minioadmin</ID><DisplayName>minioadmin</DisplayName></Initiator><Owner><ID>minioadmin</ID><DisplayName>minioadmin</DisplayName></Owner><StorageClass>STANDARD</StorageClass><Initiated>2026-12-01T10:00:00.123Z</Initiated></Upload>", i, i)
	}
	doc.WriteString("</ListMultipartUploadsResult>")
	s := doc.String()
	b.Run("client", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			if _, ok, err := s3client.DecodeUploadListing(strings.NewReader(s)); !ok || err != nil {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("encoding_xml", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			if _, err := xmlListing(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
