"""crosslayer.settings: the checks every per-checkpoint job's settings share, each naming its key."""

import numpy as np
import pytest

from crosslayer.settings import is_int, require_bool, require_choice, require_int, require_number


@pytest.mark.parametrize("value, expected", [(3, True), (np.int64(3), True), (True, False), (3.0, False), ("3", False)])
def test_is_int_takes_python_and_numpy_integers_but_no_bool(value, expected):
    assert is_int(value) is expected


def test_each_check_names_the_key_and_the_value():
    with pytest.raises(ValueError, match=r"^a\.k must be an integer >= 1, got 0$"):
        require_int("a.k", 0, minimum=1)
    with pytest.raises(ValueError, match=r"^a\.t must be an integer, got 1\.5$"):
        require_int("a.t", 1.5)
    with pytest.raises(ValueError, match=r"^a\.tol must be a number >= 0, got nan$"):
        require_number("a.tol", float("nan"), minimum=0)
    with pytest.raises(ValueError, match=r"^a\.m must be one of \('x', 'y'\), got 'z'$"):
        require_choice("a.m", "z", ["x", "y"])
    with pytest.raises(ValueError, match=r"^a\.b must be true or false, got 1$"):
        require_bool("a.b", 1)


def test_accepted_values_pass():
    require_int("a.t", -1)
    require_int("a.k", np.int32(2), minimum=2)
    require_number("a.tol", np.float32(0.5), minimum=0)
    require_number("a.tol", 0, minimum=0)
    require_choice("a.m", "x", ("x", "y"))
    require_bool("a.b", False)
