"""Project-wide pytest configuration: the plugin is tested through pytester, and
property tests never fail on timing (the suite runs on small, busy machines)."""

from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]

settings.register_profile(
    "dsh-replay",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("dsh-replay")
