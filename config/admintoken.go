package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// MinAdminTokenLength is the shortest admin token accepted: shorter ones
// are guessable, and a token is meant to be generated, not typed
// (`openssl rand -hex 32`).
const MinAdminTokenLength = 16

// AdminTokenFileName is the name of the file in etcd.embedded.data_dir
// where serve keeps the admin token it generates when neither admin.token
// nor admin.token_file is set.
const AdminTokenFileName = "admin-token"

// AdminToken returns the bearer token configured for the admin API:
// admin.token, or the trimmed content of admin.token_file, read now, so
// that a rotated file takes effect at the next start. Empty means none is
// configured; serve then uses the generated one (GeneratedAdminTokenPath).
// Errors never hold the token.
func (c *Config) AdminToken() (Secret, error) {
	if c.Admin.Token != "" || c.Admin.TokenFile == "" {
		return c.Admin.Token, nil
	}
	tok, err := ReadTokenFile(c.Admin.TokenFile)
	if err != nil {
		return "", err
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("the token in %s %w", c.Admin.TokenFile, err)
	}
	return Secret(tok), nil
}

// ReadTokenFile reads a token from the file at path (readSecretFile). The
// command-line clients read --token-file with it too.
func ReadTokenFile(path string) (string, error) { return readSecretFile("token file", path) }

// GeneratedAdminTokenPath is where serve keeps the admin token it generates
// when none is configured: the file admin-token in etcd.embedded.data_dir,
// the directory serve keeps its state in (with an external etcd too, where
// that directory holds nothing else). A relative data_dir is relative to
// the working directory, for serve and for the commands alike.
func (c *Config) GeneratedAdminTokenPath() string {
	return filepath.Join(c.Etcd.Embedded.DataDir, AdminTokenFileName)
}

// generatedTokenBytes is the entropy of a generated admin token: 256 bits,
// written as 64 hex digits.
const generatedTokenBytes = 32

// LoadOrCreateAdminToken returns the admin token kept in the file at path,
// creating the file with a new random token when there is none; created
// reports that it did. The file is created with mode 0600, complete before
// it appears under its name, so that a process starting beside this one
// reads either nothing or the whole token, and two processes creating it
// at once end up with the same token. An existing file that other users
// may read or write is refused rather than used: its token may have
// leaked. Errors never hold the token.
func LoadOrCreateAdminToken(path string) (tok Secret, created bool, err error) {
	tok, err = readPrivateToken(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("admin token: %w", err)
	}
	raw := make([]byte, generatedTokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", false, fmt.Errorf("admin token: %w", err)
	}
	fresh := hex.EncodeToString(raw)
	// os.CreateTemp creates the file with mode 0600.
	f, err := os.CreateTemp(dir, "."+AdminTokenFileName+"-*")
	if err != nil {
		return "", false, fmt.Errorf("admin token: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // once linked, the file lives on under path
	_, err = f.WriteString(fresh + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", false, fmt.Errorf("admin token file %s: %w", path, err)
	}
	// A link, unlike a rename, never replaces a file another process
	// created in the meantime: whoever links first wins, and the other
	// reads the winner's token.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			tok, err = readPrivateToken(path)
			return tok, false, err
		}
		return "", false, fmt.Errorf("admin token file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the new name survives a crash
		d.Close()
	}
	return Secret(fresh), true, nil
}

// readPrivateToken reads a generated token file, refusing one that other
// users may read or write, and checks the token's form. A missing file is
// an error wrapping fs.ErrNotExist.
func readPrivateToken(path string) (Secret, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("admin token file %s is a directory", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("admin token file %s has mode %04o, which lets other users read or change it; "+
			"chmod 600 it if nobody else had the token, or delete it to have a new one generated", path, perm)
	}
	tok, err := ReadTokenFile(path)
	if err != nil {
		return "", err
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("the token in %s %w (delete the file to have a new one generated)", path, err)
	}
	return Secret(tok), nil
}

// checkToken checks a token's form without ever quoting it: long enough,
// and visible ASCII only, so that it fits an Authorization header as it is.
func checkToken(tok string) error {
	if len(tok) < MinAdminTokenLength {
		return fmt.Errorf("is shorter than %d characters (generate one, such as with `openssl rand -hex 32`)", MinAdminTokenLength)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return errors.New("holds a space, a control character or a character outside ASCII; use letters, digits and punctuation only")
		}
	}
	return nil
}

// validateAdmin checks admin.token and admin.token_file, reading the file,
// so that a missing or bad token stops the start instead of leaving the
// admin API shut, and the names of admin.hosts.
func (c *Config) validateAdmin() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	a := c.Admin
	switch {
	case a.Token != "" && a.TokenFile != "":
		bad("admin.token_file", "set admin.token or admin.token_file, not both")
	case a.Token != "":
		if err := checkToken(string(a.Token)); err != nil {
			bad("admin.token", "the token %v", err)
		}
	case a.TokenFile != "":
		if _, err := c.AdminToken(); err != nil {
			bad("admin.token_file", "%v", err)
		}
	}
	for _, h := range a.Hosts {
		if err := checkAdminHost(h); err != nil {
			bad("admin.hosts", "%q: %v", h, err)
		}
	}
	return errs
}

// NormalizeHost returns a host name or IP address in the form admin.hosts
// and the admin listener compare: lower case, without a trailing dot or
// the brackets of an IPv6 literal, and an IP address in its canonical
// form (::ffff:127.0.0.1 is 127.0.0.1).
func NormalizeHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().WithZone("").String()
	}
	return h
}

// checkAdminHost accepts a host name or an IP address, without a scheme,
// port or path: what may follow "Host:" before the port.
func checkAdminHost(h string) error {
	if h == "" {
		return errors.New("empty name")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	if strings.Contains(h, "://") || strings.ContainsAny(h, "/:@") {
		return errors.New("want a host name or an IP address only, without scheme, port or path")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("not a host name")
		}
		for i := 0; i < len(label); i++ {
			ch := label[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
				return fmt.Errorf("%q is not allowed in a host name", ch)
			}
		}
	}
	return nil
}
