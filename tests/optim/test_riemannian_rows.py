"""``RiemannianSGD/RiemannianAdam.step(rows=...)``: rows are checked before any update."""

from __future__ import annotations

import pytest
import torch

import hypermc as hm
from hypermc.manifolds import PoincareBall
from hypermc.optim import RiemannianAdam, RiemannianSGD

f64 = torch.float64


def _param(n: int) -> hm.ManifoldParameter:
    p = hm.ManifoldParameter(torch.zeros(n, 2, dtype=f64), manifold=PoincareBall())
    p.grad = torch.ones(n, 2, dtype=f64)
    return p


@pytest.mark.parametrize("cls", [RiemannianSGD, RiemannianAdam])
@pytest.mark.parametrize(
    ("rows", "exc", "match"),
    [
        (torch.tensor([4]), ValueError, r"\.step: rows must lie in \[0, 4\) \(rows of the parameter\); got values from 4 to 4"),
        (torch.tensor([-1, 2]), ValueError, r"\.step: rows must lie in \[0, 8\) \(rows of the parameter\); got values from -1 to 2"),
        (torch.tensor([0.0]), TypeError, r"\.step: rows must be a 1-d integer tensor of row indices; got torch\.float32"),
    ],
)
def test_bad_rows_are_refused_before_any_update(cls, rows, exc, match):
    big, small = _param(8), _param(4)  # rows 4 is inside the first group, outside the second
    opt = cls([{"params": [big]}, {"params": [small]}], lr=0.1, sparse_rows=True)
    with pytest.raises(exc, match=cls.__name__ + match):
        opt.step(rows=rows)
    assert torch.equal(big.detach(), torch.zeros(8, 2, dtype=f64))  # the first group was not stepped either


@pytest.mark.parametrize("cls", [RiemannianSGD, RiemannianAdam])
def test_rows_without_a_sparse_group_are_refused(cls):
    p = _param(4)
    opt = cls([p], lr=0.1)
    with pytest.raises(
        ValueError, match=rf"{cls.__name__}\.step: rows= selects rows of the parameter groups with sparse_rows=True, and no group has it"
    ):
        opt.step(rows=torch.tensor([10]))
    assert torch.equal(p.detach(), torch.zeros(4, 2, dtype=f64))


@pytest.mark.parametrize("cls", [RiemannianSGD, RiemannianAdam])
def test_rows_inside_move_only_those_rows(cls):
    p = _param(4)
    cls([p], lr=0.1, sparse_rows=True).step(rows=torch.tensor([1, 2]))
    moved = (p.detach() != 0).any(dim=1).tolist()
    assert moved == [False, True, True, False]
