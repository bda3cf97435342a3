// Package deploy holds what an operator deploys next to sweepgate: a
// Grafana dashboard (grafana/sweepgate.json), Prometheus alerting rules
// (prometheus/alerts.yml) and a compose file for a multi-node set-up
// (compose.yaml, see README.md here and docs/deployment.md). It has no
// code; its tests keep those files true to the code: they parse, name
// only metrics that sweepgate registers, and use only settings that exist.
// They also check that no metric label could carry a bucket, key, upload
// id or digest.
package deploy
