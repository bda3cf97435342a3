// Package reload applies a configuration read again under a running
// process: the settings that can change without a restart (client
// credentials, the backend's keys, the TLS certificate), all of them or
// none.
//
// A Reloader holds the configuration in effect and a list of Parts. A
// reload loads the configuration anew, asks every part to prepare itself
// from it (which changes nothing that serves), and only when every part
// is ready commits them all; any failure leaves every value as it was and
// is returned with every reason. SIGHUP (OnHangup) and the admin API both
// call Reload.
package reload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/config"
)

// Part prepares one reloadable piece of the process from a newly loaded
// configuration. Preparing changes nothing that serves; commit makes the
// piece live and cannot fail.
type Part func(*config.Config) (commit func(), err error)

// Reloader applies reloads, one at a time.
type Reloader struct {
	load   func() (*config.Config, error)
	parts  []Part
	logger *slog.Logger

	mu sync.Mutex
	// current is the configuration the last reload (or the start) read,
	// which the next reload is compared with; inEffect is the one the
	// process runs on (InEffect).
	current, inEffect *config.Config

	reloads    *prometheus.CounterVec
	successful prometheus.Gauge
}

// New returns a Reloader whose configuration in effect is current and
// that reads the next one with load. Its metrics are registered on reg.
func New(current *config.Config, load func() (*config.Config, error), logger *slog.Logger, reg prometheus.Registerer) *Reloader {
	r := &Reloader{
		load:     load,
		logger:   logger,
		current:  current,
		inEffect: current,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sweepgate", Name: "config_reloads_total",
			Help: "Reloads of the configuration (SIGHUP, POST /admin/v1/reload), by outcome: success, or failure when the new configuration was refused and the old one kept.",
		}, []string{"outcome"}),
		successful: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sweepgate", Name: "config_last_reload_successful",
			Help: "1 when the last reload applied its configuration (or there was none yet), 0 when it was refused and the process runs on the values it had.",
		}),
	}
	r.reloads.WithLabelValues("success")
	r.reloads.WithLabelValues("failure")
	r.successful.Set(1)
	reg.MustRegister(r.reloads, r.successful)
	return r
}

// Add makes part one of the pieces a reload applies. Parts are added
// while the process starts, before any reload.
func (r *Reloader) Add(part Part) { r.parts = append(r.parts, part) }

// Reload loads the configuration and applies its reloadable settings, or
// none of them. It returns the settings whose change waits for a restart
// (config.RestartNeeded).
func (r *Reloader) Reload(context.Context) (restartNeeded []string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	restartNeeded, err = r.apply()
	if err != nil {
		r.reloads.WithLabelValues("failure").Inc()
		r.successful.Set(0)
		r.logger.Error("reload refused; the values in effect are kept", "err", err)
		return nil, err
	}
	r.reloads.WithLabelValues("success").Inc()
	r.successful.Set(1)
	if len(restartNeeded) > 0 {
		r.logger.Warn("reloaded; some changed settings take effect only at the next restart", "restart_needed", restartNeeded)
	} else {
		r.logger.Info("reloaded the client credentials, the backend keys, the TLS certificates, the trusted proxies and the limits")
	}
	return restartNeeded, nil
}

func (r *Reloader) apply() ([]string, error) {
	next, err := r.load()
	if err != nil {
		return nil, fmt.Errorf("the configuration: %w", err)
	}
	commits := make([]func(), 0, len(r.parts))
	var errs []error
	for _, part := range r.parts {
		commit, err := part(next)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		commits = append(commits, commit)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, commit := range commits {
		commit()
	}
	restartNeeded := config.RestartNeeded(r.current, next)
	r.current = next
	r.inEffect = config.InEffect(r.inEffect, next)
	return restartNeeded, nil
}

// InEffect returns the configuration the process runs on: that of its
// start with the settings the reloads since applied. A setting whose
// change waits for a restart keeps its value of the start here.
func (r *Reloader) InEffect() *config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inEffect
}

// OnHangup reloads at every SIGHUP until ctx ends. From its call on, a
// SIGHUP no longer ends the process.
func (r *Reloader) OnHangup(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				r.logger.Info("SIGHUP: reloading the configuration")
				_, _ = r.Reload(ctx) // Reload logs its outcome
			}
		}
	}()
}
