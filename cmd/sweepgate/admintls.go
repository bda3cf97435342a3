package main

import (
	"crypto/tls"
	"net"

	"github.com/sweepgate/sweepgate/reload"
)

// adminTLS returns the admin listener l serves on: l itself without
// admin.tls_cert_file, else l speaking TLS only (1.2 or later) with the
// certificate of admin.tls_cert_file and admin.tls_key_file, which a
// reload reads again. A pair that does not load stops the start.
func (s *server) adminTLS(l net.Listener) (net.Listener, error) {
	if s.cfg.Admin.TLSCertFile == "" {
		return l, nil
	}
	cert, err := reload.LoadCertificate(s.cfg, reload.AdminFiles)
	if err != nil {
		return nil, err
	}
	s.reloader.Add(cert.Reload)
	return tls.NewListener(l, &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: cert.Get,
		NextProtos:     []string{"http/1.1"},
	}), nil
}
