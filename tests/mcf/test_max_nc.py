"""The most components a dtype can hold (:func:`hypermc.mcf.eft.max_nc`) and its refusal."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch

import hypermc as hm
from hypermc.mcf.eft import max_nc
from tests.oracle import components_to_fraction

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize(("dtype", "most"), list(zip(DTYPES, [4, 33, 12, 40])))
def test_max_nc_is_reached_and_one_more_component_underflows(dtype, most):
    """The densest expansion: ``c_k = 2^(emax - k p)``, each exactly half an ulp of the one
    before (a tie to even: normalised), from the top binade down. Its ``max_nc``
    components are non-zero floats of ``dtype``; the next one is below half the smallest
    subnormal, so it rounds to zero."""
    assert max_nc(dtype) == most
    info = torch.finfo(dtype)
    p = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 53}[dtype]
    emax = {torch.float16: 15, torch.bfloat16: 127, torch.float32: 127, torch.float64: 1023}[dtype]
    comps = [Fraction(2) ** (emax - k * p) for k in range(most + 1)]
    stored = [Fraction(torch.tensor(float(c), dtype=torch.float64).to(dtype).item()) for c in comps]
    assert stored[:most] == comps[:most]
    assert stored[most] == 0 and comps[most] < Fraction(info.smallest_normal) * Fraction(info.eps) / 2
    x = hm.MCTensor.from_components(torch.tensor([float(c) for c in comps[:most]], dtype=torch.float64).to(dtype))
    assert x.nc == most and components_to_fraction(x.components) == sum(comps[:most])
    assert all(c != 0 for c in x.components.tolist())


@pytest.mark.parametrize("dtype", DTYPES)
def test_mc_and_from_mpmath_refuse_more_components_than_the_dtype_holds(dtype):
    most = max_nc(dtype)
    assert hm.mc([1.0], nc=most, dtype=dtype).nc == most
    name = str(dtype).replace(".", r"\.")
    with pytest.raises(ValueError, match=rf"mc: nc={most + 1} is more components than {name} can hold \(at most {most}: "):
        hm.mc([1.0], nc=most + 1, dtype=dtype)
    with pytest.raises(ValueError, match=rf"mc: nc={most + 1} is more components than {name} can hold \(at most {most}"):
        hm.mc(hm.mc([1.0], nc=2, dtype=torch.float64), nc=most + 1, dtype=dtype)
    with pytest.raises(ValueError, match=rf"from_mpmath: nc={most + 1} is more components than {name} can hold \(at most {most}"):
        hm.mcf.from_mpmath(["0.1"], nc=most + 1, dtype=dtype)


def test_float16_with_twenty_components_is_refused():
    with pytest.raises(ValueError, match=r"mc: nc=20 is more components than torch\.float16 can hold \(at most 4"):
        hm.mc(torch.ones(2), nc=20, dtype=torch.float16)
