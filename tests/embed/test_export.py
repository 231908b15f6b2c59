"""``hypermc.embed.export``: the files the CLI's ``export`` writes, from any table."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

import hypermc as hm
from hypermc.embed import export
from hypermc.manifolds import PoincareBall
from tests.oracle import components_to_fraction

f32, f64 = torch.float32, torch.float64


def _table(nc: int | None, dtype: torch.dtype = f64):
    base = torch.tensor([[0.5, -0.25], [0.1, 0.3], [0.0, 0.7]], dtype=f64)
    if nc is None:
        return base.to(dtype)
    return hm.mc(base, nc=nc, dtype=dtype) + hm.mc(torch.full((3, 2), 2.0**-40, dtype=f64), nc=nc, dtype=dtype) / 3


@pytest.mark.parametrize(("nc", "dtype"), [(None, f64), (2, f64), (3, f32)])
def test_tsv_npy_pt_hold_the_names_nearest_floats_and_components(tmp_path, nc, dtype):
    x = _table(nc, dtype)
    comps = x.components if nc else x.unsqueeze(-1)
    exact = components_to_fraction(comps)  # (3, 2) Fractions
    nearest = [[float(v) for v in row] for row in exact.tolist()]
    names = ["a", "b b", "c.n.01"]

    tsv = export(x, names, tmp_path / "e.tsv")
    lines = tsv[0].read_text(encoding="utf-8").splitlines()
    head = ["name", "x0", "x1"] + (["x0_exact", "x1_exact"] if nc else [])
    assert lines[0].split("\t") == head and len(lines) == 4
    for line, name, row, want in zip(lines[1:], names, exact.tolist(), nearest):
        cells = line.split("\t")
        assert cells[0] == name and [float(c) for c in cells[1:3]] == want
        if nc:
            for cell, value in zip(cells[3:], row):
                assert abs(Fraction(cell) - value) <= abs(value) * Fraction(2) ** -(nc * 24 + 2)

    npy = export(x, names, tmp_path / "e", format="npy")
    assert [p.name for p in npy] == ["e", "e.components.npy", "e.names.txt"]
    with open(npy[0], "rb") as f:
        assert np.load(f).tolist() == nearest
    assert np.array_equal(np.load(npy[1]), comps.numpy())
    assert npy[2].read_text(encoding="utf-8") == "a\nb b\nc.n.01\n"

    pt = export(x, names, tmp_path / "e.pt", format="pt", manifold=PoincareBall(curvature=-2.0))
    blob = torch.load(pt[0], weights_only=True)
    assert blob["names"] == names and blob["manifold"] == "PoincareBall" and blob["curvature"] == -2.0
    assert torch.equal(blob["components"], comps) and blob["coordinates"].tolist() == nearest


def test_existing_files_are_refused_unless_overwrite(tmp_path):
    x = _table(2)
    export(x, ["a", "b", "c"], tmp_path / "e", format="npy")
    (tmp_path / "e").unlink()  # one of the three files left is enough to refuse
    with pytest.raises(FileExistsError, match=r"export: .*e\.components\.npy, .*e\.names\.txt already exists; pass overwrite=True"):
        export(x, ["a", "b", "c"], tmp_path / "e", format="npy")
    assert not (tmp_path / "e").exists()  # nothing written
    export(x, ["a", "b", "c"], tmp_path / "e", format="npy", overwrite=True)
    assert (tmp_path / "e").exists()


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (dict(embeddings=torch.zeros(3)), TypeError, r"export: embeddings must be an \(N, dim\) floating Tensor or MCTensor; got Tensor"),
        (dict(embeddings=torch.zeros(3, 2, dtype=torch.int64)), TypeError, r"embeddings must be an \(N, dim\) floating"),
        (dict(names="abc"), TypeError, r"export: names must be a sequence of str \(one per row\); got str"),
        (dict(names=["a", "b"]), ValueError, r"export: names has 2 entries for 3 rows of embeddings"),
        (dict(names=["a", 2, "c"]), TypeError, r"export: names\[1\] must be a str; got int 2"),
        (dict(names=["a", "b\tc", "d"]), ValueError, r"export: names\[1\] = 'b\\tc' holds a tab or line break"),
        (dict(format="csv"), ValueError, r"export: format must be one of tsv, npy, pt; got 'csv'"),
        (dict(format="pt"), ValueError, r"export: format='pt' records the manifold; pass manifold="),
        (dict(manifold="ball"), TypeError, r"export: manifold must be a hypermc manifold; got str"),
        (dict(overwrite=1), TypeError, r"export: overwrite must be True or False; got int 1"),
        (dict(out=3), TypeError, r"export: out must be a file path; got int"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, exc, match):
    args = dict(embeddings=_table(None), names=["a", "b", "c"], out=tmp_path / "e.tsv") | kwargs
    with pytest.raises(exc, match=match):
        export(args.pop("embeddings"), args.pop("names"), args.pop("out"), **args)
    assert not (tmp_path / "e.tsv").exists()
