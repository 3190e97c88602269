import numpy as np
import pytest
from hypothesis import settings

# The same examples on every machine and run, and no state carried between runs (no example database in
# the checkout): a property test passes or fails the same way on a laptop, a cluster node and CI.
settings.register_profile("headflow", derandomize=True, database=None, print_blob=True)
settings.load_profile("headflow")


@pytest.fixture
def rng():
    return np.random.default_rng(20260512)


def pytest_terminal_summary(terminalreporter):
    """After a run that included tests/test_architecture.py: its measures against their targets."""
    ran = any(getattr(r, "nodeid", "").startswith("tests/test_architecture.py")
              for reports in terminalreporter.stats.values() for r in reports)
    if ran:
        from tests.test_architecture import report

        terminalreporter.section("architecture: measures against their targets")
        for line in report():
            terminalreporter.write_line(line)
