"""Operating the app: backups, retention, health checks, logs and the app's own Prometheus metrics (docs/deployment.md)."""
