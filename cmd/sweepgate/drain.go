package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// How serve stops: the drain that keeps listeners serving while load
// balancers notice /readyz, then the shutdown that lets in-flight requests
// finish.

// drain keeps every listener serving for the drain delay while /readyz
// answers 503, so that load balancers take the process out of rotation
// before it stops accepting. Responses meanwhile close their connections
// (no keep-alive), so that clients reconnect, through the balancer, to
// another process. A listener or the embedded etcd failing ends the drain
// early with its error.
func (s *server) drain(serveErr <-chan error) error {
	if s.cfg.Shutdown.DrainDelay <= 0 {
		return nil
	}
	for _, srv := range s.servers {
		srv.SetKeepAlivesEnabled(false)
	}
	t := time.NewTimer(s.cfg.Shutdown.DrainDelay)
	defer t.Stop()
	select {
	case <-t.C:
		s.logger.Info("drain delay over; no longer accepting, finishing in-flight requests")
		return nil
	case err := <-serveErr:
		s.logger.Error("drain ended early: a listener failed", "err", err)
		return err
	case err := <-s.etcdDied:
		s.logger.Error("drain ended early: embedded etcd failed", "err", err)
		return fmt.Errorf("embedded etcd failed: %w", err)
	}
}

// shutdown stops all servers at once, letting in-flight requests finish for
// up to timeout, then closes what is left.
func shutdown(servers []*http.Server, names []string, timeout time.Duration, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i, srv := range servers {
		wg.Go(func() {
			if err := srv.Shutdown(ctx); err != nil {
				logger.Warn("requests still running at the shutdown deadline were cut off", "listener", names[i], "err", err)
				srv.Close()
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s listener: %w", names[i], err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
