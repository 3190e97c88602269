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
