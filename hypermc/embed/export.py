"""Write embeddings with their node names to files other tools read (tsv, npy, pt).

:func:`export` is what ``python -m hypermc export`` runs on a checkpoint's table; call
it on any ``(N, dim)`` table (an MCTensor keeps its full precision in the ``tsv``
``x{i}_exact`` columns, the ``npy`` components file and the ``pt`` dict).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch

from .._checks import check_bool, check_instance
from ..manifolds.base import Manifold
from ..mcf import MCTensor

__all__ = ["export", "FORMATS", "output_paths"]

#: The file formats of :func:`export`.
FORMATS = ("tsv", "npy", "pt")
#: Files written next to ``out`` per format (suffixes appended to its name).
_EXTRA = {"tsv": (), "npy": (".components.npy", ".names.txt"), "pt": ()}


def output_paths(out: str | os.PathLike[str], format: str = "tsv") -> list[Path]:
    """The files :func:`export` writes for ``out`` and ``format`` (``out`` first).

    Example:
        >>> [str(p) for p in output_paths("emb.npy", "npy")]
        ['emb.npy', 'emb.npy.components.npy', 'emb.npy.names.txt']
    """
    if format not in FORMATS:
        raise ValueError(f"export: format must be one of {', '.join(FORMATS)}; got {format!r}")
    out = Path(out)
    return [out, *(out.with_name(out.name + suffix) for suffix in _EXTRA[format])]


def export(
    embeddings: torch.Tensor,
    names: Sequence[str],
    out: str | os.PathLike[str],
    *,
    format: str = "tsv",
    manifold: Manifold | None = None,
    overwrite: bool = False,
    progress: bool = False,
) -> list[Path]:
    """Write an ``(N, dim)`` table of points and the ``N`` node names.

    Formats:

    * ``tsv``: a header ``name x0 .. x{dim-1}`` and one row per node with the float64
      nearest to each coordinate; for MC tables (``nc > 1``) also ``x{i}_exact``, the
      exact value of each coordinate as a decimal string (all the digits its
      ``nc`` components hold, and 3 more).
    * ``npy``: ``out`` (float64 ``(N, dim)``), ``out.components.npy`` (``(N, dim,
      nc)`` in the component dtype) and ``out.names.txt`` (one name per line).
    * ``pt``: one ``torch.save`` dict with ``names``, ``coordinates`` (float64),
      ``components``, ``manifold`` (class name) and ``curvature``; needs ``manifold``.

    Args:
        embeddings: ``(N, dim)`` floating Tensor or MCTensor (not changed).
        names: ``N`` node names (str without tab, newline or carriage return).
        out: the output file (``npy`` adds two files next to it, see
            :func:`output_paths`).
        format: ``"tsv"``, ``"npy"`` or ``"pt"``.
        manifold: the embeddings' manifold (recorded by ``pt``; required there).
        overwrite: replace existing output files (else they are refused).
        progress: a tqdm bar over the ``tsv`` rows (on stderr).

    Returns:
        the paths written, ``out`` first.

    Raises:
        TypeError, ValueError: bad arguments (the message names the argument).
        FileExistsError: an output file exists and ``overwrite`` is False (nothing is
            written).

    Example:
        >>> x = hm.mc(torch.tensor([[0.5, 0.25], [0.0, -0.125]], dtype=torch.float64), nc=2) + 2.0**-70
        >>> paths = export(x, ["a", "b"], "emb.tsv")
        >>> paths[0].read_text().splitlines()[0].split()
        ['name', 'x0', 'x1', 'x0_exact', 'x1_exact']
        >>> paths[0].read_text().splitlines()[1].split()  # nearest float64, then every digit of the MC value
        ['a', '0.5', '0.25', '0.50000000000000000000084703294725430033907', '0.25000000000000000000084703294725430033907']
    """
    components = _components(embeddings)
    names = _names(names, components.shape[0])
    check_instance("export", "out", out, (str, os.PathLike), "a file path")
    paths = output_paths(out, format)
    check_bool("export", "overwrite", overwrite)
    check_bool("export", "progress", progress)
    if manifold is not None:
        check_instance("export", "manifold", manifold, Manifold, "a hypermc manifold")
    elif format == "pt":
        raise ValueError("export: format='pt' records the manifold; pass manifold= (the embeddings' manifold)")
    existing = [str(p) for p in paths if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"export: {', '.join(existing)} already exists; pass overwrite=True to replace it")
    coords = MCTensor.from_components(components.to(torch.float64)).approx()  # nearest float64 of each exact sum
    if format == "pt":
        assert manifold is not None  # refused above
        blob = {
            "names": names,
            "coordinates": coords,
            "components": components.clone(),
            "manifold": type(manifold).__name__,
            "curvature": float(getattr(manifold, "curvature", 0.0)),
        }
        torch.save(blob, paths[0])
    elif format == "npy":
        _write_npy(paths, names, coords, components)
    else:
        _write_tsv(paths[0], names, coords, components, progress)
    return paths


def _components(embeddings: torch.Tensor) -> torch.Tensor:
    """The ``(N, dim, nc)`` components of a table (a plain one has ``nc = 1``), on the CPU."""
    if not isinstance(embeddings, torch.Tensor) or not embeddings.is_floating_point() or embeddings.dim() != 2:
        raise TypeError(
            "export: embeddings must be an (N, dim) floating Tensor or MCTensor; got "
            f"{type(embeddings).__name__} {tuple(getattr(embeddings, 'shape', ()))}"
        )
    if isinstance(embeddings, MCTensor):
        return embeddings.components.detach().cpu()
    return embeddings.detach().cpu().unsqueeze(-1)


def _names(names: Sequence[str], n: int) -> list[str]:
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise TypeError(f"export: names must be a sequence of str (one per row); got {type(names).__name__}")
    names = list(names)
    if len(names) != n:
        raise ValueError(f"export: names has {len(names)} entries for {n} rows of embeddings; pass one name per row")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(f"export: names[{i}] must be a str; got {type(name).__name__} {name!r}")
        if any(ch in name for ch in "\t\n\r"):
            raise ValueError(f"export: names[{i}] = {name!r} holds a tab or line break (the tsv and names.txt separators)")
    return names


def _write_npy(paths: list[Path], names: list[str], coords: torch.Tensor, components: torch.Tensor) -> None:
    import numpy as np

    with open(paths[0], "wb") as f:  # a file object: np.save appends no .npy
        np.save(f, coords.numpy(), allow_pickle=False)
    with open(paths[1], "wb") as f:
        np.save(f, components.numpy(), allow_pickle=False)
    paths[2].write_text("".join(f"{name}\n" for name in names), encoding="utf-8")


def _write_tsv(out: Path, names: list[str], coords: torch.Tensor, components: torch.Tensor, progress: bool) -> None:
    import mpmath

    from .._progress import progress_bar

    dim, nc = components.shape[1], components.shape[2]
    header = ["name", *(f"x{i}" for i in range(dim))]
    exact_digits = None
    if nc > 1:  # every digit the sum of the components holds, and 3 more
        p = torch.finfo(components.dtype).bits  # an upper bound on the significand bits
        exact_digits = int(nc * p * 0.30103) + 3
        header += [f"x{i}_exact" for i in range(dim)]
    rows = ["\t".join(header)]
    values = components.to(torch.float64).tolist()
    with progress_bar(progress, len(names), unit="row", desc="export") as bar:
        for name, row, parts in zip(names, coords.tolist(), values):
            cells = [name, *(repr(v) for v in row)]
            if exact_digits is not None:
                with mpmath.workprec(2200):
                    cells += [mpmath.nstr(mpmath.fsum(mpmath.mpf(c) for c in coord), exact_digits) for coord in parts]
            rows.append("\t".join(cells))
            bar.update(1)
    tmp = out.with_name(out.name + ".tmp")  # atomic: a crash leaves the old file or the new one
    tmp.write_text("\n".join(rows) + "\n", encoding="utf-8")
    tmp.replace(out)
