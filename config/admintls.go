package config

import (
	"fmt"
	"io"
	"os"
)

// validateAdminTLS checks admin.tls_cert_file and admin.tls_key_file: both
// or neither, a listener to serve them on, and each file readable. Whether
// the pair is a certificate and its key is for the listener to find out
// when it loads them (reload.LoadCertificate), as it is for tls_listen.
func (c *Config) validateAdminTLS() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	a := c.Admin
	switch {
	case a.TLSCertFile == "" && a.TLSKeyFile == "":
		return nil
	case a.TLSCertFile == "":
		bad("admin.tls_cert_file", "required when admin.tls_key_file is set")
	case a.TLSKeyFile == "":
		bad("admin.tls_key_file", "required when admin.tls_cert_file is set")
	}
	if a.Listen == "" {
		bad("admin.tls_cert_file", "set, but admin.listen is empty, so there is no admin listener to serve it")
	}
	for _, f := range []struct{ key, path string }{{"admin.tls_cert_file", a.TLSCertFile}, {"admin.tls_key_file", a.TLSKeyFile}} {
		if f.path == "" {
			continue
		}
		if err := checkReadable(f.path); err != nil {
			bad(f.key, "%v", err)
		}
	}
	return errs
}

// checkReadable reports whether path is a regular file this process can
// read.
func checkReadable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if _, err := f.Read(make([]byte, 1)); err != nil && err != io.EOF {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
