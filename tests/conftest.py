import os

from hypothesis import HealthCheck, settings

# The sanitizer run in CI is ~10x slower: it asks for fewer examples.
settings.register_profile("default", max_examples=int(os.environ.get("BULKWIRE_HYPOTHESIS_EXAMPLES", "300")),
                          deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")
