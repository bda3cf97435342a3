package etcdstore

import "time"

// WithRequestTimeout returns a Store like s whose every KV request (get,
// put, delete, transaction) ends after at most d, however long its
// context allows: the store a request path uses, so that an etcd that
// hangs costs a client d and a retryable refusal, never a hung request.
// Passes and other background work keep an unbounded store. d <= 0
// returns s.
func (s *Store) WithRequestTimeout(d time.Duration) *Store {
	if d <= 0 {
		return s
	}
	return s.withKV(func(k *storeKV) { k.timeout = d })
}

// RequestTimeout returns the bound of the store's requests, 0 when none.
func (s *Store) RequestTimeout() time.Duration {
	return s.options().timeout
}
