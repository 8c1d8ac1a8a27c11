"""One module per CLI command: each composes stage functions; the daemon calls the same."""
