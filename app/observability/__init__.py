"""Observability: the Prometheus exposition of the service (``GET /metrics``)."""
