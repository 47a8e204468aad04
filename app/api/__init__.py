"""The HTTP API: routes (one module per resource), their dependencies, auth and plumbing."""
