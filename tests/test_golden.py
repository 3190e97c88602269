"""Results, not just files, agree across machines: the golden table recomputed (tests/golden_rows.py).

The table was written on one machine; here every row is recomputed and must agree within three times
its stated error (plus 1e-12 relative for round-off), the error the computation states itself, never a
tolerance fitted to a rerun.
"""

import json

import pytest

from tests.golden_rows import GOLDEN, ROWS

TABLE = json.loads(GOLDEN.read_text())


def test_the_table_has_every_row_with_a_stated_error():
    assert sorted(TABLE) == sorted(ROWS)
    for row in TABLE.values():
        assert row["stated_error"] > 0 and row["what"]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_golden_row_agrees_within_its_stated_error(name):
    golden = TABLE[name]
    value, error = ROWS[name]()
    allowed = 3 * golden["stated_error"] + 1e-12 * abs(golden["value"])
    assert abs(value - golden["value"]) <= allowed, (name, value, golden)
    # the error this machine states is of the same size: a route that lost its accuracy fails here too
    assert error <= 10 * golden["stated_error"] + 1e-12 * abs(golden["value"]), (name, error, golden)
