"""The `dsh-replay` command line: one module per command."""
