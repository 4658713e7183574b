"""Project-wide pytest configuration: the plugin is tested through pytester."""

pytest_plugins = ["pytester"]
