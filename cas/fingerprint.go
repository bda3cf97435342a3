package cas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Fingerprint returns a short digest of everything in the layout that
// decides what a write records and what the sweep reads: each namespace
// and source, in order, with every field. Two processes with the same
// fingerprint classify every key alike; an empty layout has the
// fingerprint "" (digest reclamation off).
func (l *Layout) Fingerprint() string {
	if l.Empty() {
		return ""
	}
	type ns struct {
		Name, Bucket, Prefix, Pattern, Algorithm, Content, KeyTemplate string
		Verify, ConfirmBlobs                                           bool
	}
	type src struct {
		Name, Bucket, Prefix, Pattern, Algorithm, Keys, Kind string
		MaxBody                                              int64
		ConfirmBlobs                                         bool
	}
	var doc struct {
		Namespaces []ns
		Sources    []src
	}
	for _, n := range l.Namespaces {
		doc.Namespaces = append(doc.Namespaces, ns{n.Name, n.Bucket, n.Prefix, n.Pattern.String(), n.Algorithm, n.Content, n.KeyTemplate, n.Verify, n.ConfirmBlobs})
	}
	for _, s := range l.Sources {
		keys := ""
		if s.Keys != nil {
			keys = s.Keys.String()
		}
		doc.Sources = append(doc.Sources, src{s.Name, s.Bucket, s.Prefix, s.Pattern.String(), s.Algorithm, keys, s.Kind, s.MaxBody, s.ConfirmBlobs})
	}
	b, _ := json.Marshal(doc) // plain structs always marshal
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
