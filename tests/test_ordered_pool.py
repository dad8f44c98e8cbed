"""utils.ordered_pool: results in the items' order, from worker processes or from this one; a worker's error raised
here."""

import pytest

from simplepose.utils.ordered_pool import ordered_map


def test_ordered_map_keeps_the_order_and_raises_a_workers_error():
    assert list(ordered_map(str, range(40), workers=0)) == [str(i) for i in range(40)]
    assert list(ordered_map(abs, range(-20, 20), workers=2, chunk=3, window=2)) == [abs(i) for i in range(-20, 20)]
    with pytest.raises(ValueError, match="invalid literal"):
        list(ordered_map(int, ["1", "2", "x"], workers=1, chunk=1))
