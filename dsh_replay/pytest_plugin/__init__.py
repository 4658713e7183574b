"""The pytest plugin: hooks, the `dsh_replay` fixture, option settings, cassette-driven test items, and the terminal summary."""
