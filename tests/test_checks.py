"""The shared argument checks (hypermc/_checks.py): types -> TypeError, ranges -> ValueError."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
import torch

from hypermc import _checks
from hypermc._checks import (
    check_bool,
    check_callable,
    check_choice,
    check_dtype,
    check_instance,
    check_int,
    check_nc,
    check_real,
)


def test_doctests():
    assert doctest.testmod(_checks, optionflags=doctest.ELLIPSIS).failed == 0


def test_check_int():
    assert check_int("f", "n", 3) == 3
    assert type(check_int("f", "n", np.int64(4))) is int
    assert check_int("f", "n", None, allow_none=True) is None
    assert check_int("f", "n", 0, minimum=0) == 0
    with pytest.raises(TypeError, match=r"^f: n must be an int >= 1; got bool True$"):
        check_int("f", "n", True)
    with pytest.raises(TypeError, match=r"^f: n must be an int >= 1; got float 2.0$"):
        check_int("f", "n", 2.0)
    with pytest.raises(TypeError, match=r"or None; got str .x.$"):
        check_int("f", "n", "x", allow_none=True)
    with pytest.raises(ValueError, match=r"^f: n must be an int in \[1, 4\]; got 5$"):
        check_int("f", "n", 5, maximum=4)
    with pytest.raises(ValueError, match=r"^f: n must be an int <= 4; got 5$"):
        check_int("f", "n", 5, minimum=None, maximum=4)


def test_check_real():
    assert check_real("f", "x", 2) == 2.0 and type(check_real("f", "x", 2)) is float
    assert check_real("f", "x", torch.tensor(0.5)) == 0.5
    assert check_real("f", "x", None, allow_none=True) is None
    assert check_real("f", "p", 0.0, minimum=0.0, maximum=1.0, open_max=True) == 0.0
    with pytest.raises(ValueError, match=r"^f: p must be a finite number in \[0.0, 1.0\); got 1.0$"):
        check_real("f", "p", 1.0, minimum=0.0, maximum=1.0, open_max=True)
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match=r"^f: x must be a finite number; got"):
            check_real("f", "x", bad)
    with pytest.raises(ValueError, match=r"> 0.0; got -1.0"):
        check_real("f", "x", -1, minimum=0.0, open_min=True)
    with pytest.raises(TypeError, match=r"^f: x must be a finite number; got str '1'$"):
        check_real("f", "x", "1")
    with pytest.raises(TypeError, match=r"got bool False"):
        check_real("f", "x", False)
    with pytest.raises(TypeError, match=r"got Tensor"):
        check_real("f", "x", torch.ones(2))


def test_check_bool_choice_callable_instance():
    assert check_bool("f", "b", False) is False
    with pytest.raises(TypeError, match=r"^f: b must be True or False; got int 1$"):
        check_bool("f", "b", 1)
    assert check_choice("f", "mode", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"^f: mode must be one of 'a', 'b'; got 'c'$"):
        check_choice("f", "mode", "c", ["a", "b"])
    assert check_callable("f", "act", torch.relu) is torch.relu
    with pytest.raises(TypeError, match=r"^f: act must be callable \(e.g. torch.relu\); got int$"):
        check_callable("f", "act", 3, "torch.relu")
    assert check_instance("f", "g", 3, int, "an int") == 3
    with pytest.raises(TypeError, match=r"^f: g must be a Graph; got str$"):
        check_instance("f", "g", "x", int, "a Graph")


def test_check_nc_and_dtype():
    assert check_nc("f", 3) == 3
    assert check_nc("f", None, allow_none=True) is None
    with pytest.raises(ValueError, match=r"^f: nc must be an int >= 1; got 0$"):
        check_nc("f", 0)
    with pytest.raises(TypeError, match=r"^f: nc must be an int >= 1 or None \(plain parameters\); got str '2'$"):
        check_nc("f", "2", allow_none=True, what_none="plain parameters")
    with pytest.raises(TypeError, match=r"got NoneType None"):
        check_nc("f", None)
    assert check_dtype("f", torch.float16) is torch.float16
    with pytest.raises(TypeError, match=r"^f: dtype must be one of float16, bfloat16, float32, float64; got torch.int64$"):
        check_dtype("f", torch.int64)
    with pytest.raises(TypeError, match=r"^f: dtype must be a torch.dtype \(float32, float64\); got str 'float64'$"):
        check_dtype("f", "float64", (torch.float32, torch.float64))
