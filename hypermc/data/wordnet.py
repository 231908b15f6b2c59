"""WordNet noun hierarchies as transitive-closure graphs (the Poincaré-embedding data).

:func:`wordnet_closure` reads WordNet 3.0 through nltk, from an nltk_data install or from
a WordNet dict directory such as Debian's ``/usr/share/wordnet``, and returns the
transitive closure of the noun hypernym hierarchy (all nouns, or the subtree under one
synset) as a :class:`~hypermc.data.Graph` with edges hyponym (child) -> hypernym
(ancestor). Results are cached on disk. :func:`load_mammals` returns the mammal closure
that ships with hypermc and needs no WordNet.

Closure semantics (the ones facebookresearch/poincare-embeddings uses today,
reimplemented from their description):

* for every noun synset ``s``: an edge ``(s, h)`` for every ``h`` in
  ``s.closure(hypernyms)``;
* for every instance ``i`` in some ``s.instance_hyponyms()``: ``(i, h)`` for every ``h``
  in ``i.closure(instance_hypernyms)``, and ``(i, g)`` for every ``g`` in the
  ``closure(hypernyms)`` of each such ``h``;
* no self-loops, duplicates removed. All nouns: 82,115 nodes, 743,086 edges.

For ``root="mammal.n.01"`` the benchmark's mammal filter is applied as well (see
:func:`wordnet_closure`): 1,180 nodes and 6,540 edges.

WordNet 3.0 Copyright 2006 by Princeton University; see ``NOTICE.wordnet``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.resources
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .._progress import progress_bar
from .edges import load_edges
from .graph import Graph

__all__ = [
    "MAMMAL_ROOT",
    "WordNetNotFoundError",
    "load_mammals",
    "wordnet_closure",
]

#: The root of the mammal benchmark closure.
MAMMAL_ROOT = "mammal.n.01"

#: Edges with one of these parents are dropped from the mammal closure (generic or
#: non-taxonomic ancestors that the benchmark data set leaves out).
MAMMAL_DROP_PARENTS = frozenset(
    {
        "living_thing.n.01", "object.n.01", "organism.n.01", "animal.n.01",
        "entity.n.01", "physical_entity.n.01", "whole.n.02", "vertebrate.n.01",
        "chordate.n.01", "beast_of_burden.n.01", "work_animal.n.01", "female.n.01",
        "fissipedia.n.01", "pup.n.01", "abstraction.n.06", "group.n.01", "cub.n.03",
        "young.n.01", "young_mammal.n.01", "domestic_animal.n.01", "racer.n.03",
        "male.n.01",
    }
)  # fmt: skip
#: Edges with one of these children are dropped from the mammal closure.
MAMMAL_DROP_CHILDREN = frozenset({"tusker.n.01", "female_mammal.n.01"})
#: The extra edge of the older pipeline behind the seed paper's 1,181 nodes / 6,541 edges.
LEGACY_MAMMAL_EDGE = ("packhorse.n.01", "pack_animal.n.01")

#: Shipped mammal closure (package data of ``hypermc.data``).
MAMMAL_CSV = "mammal_closure.csv"

#: Environment variable naming the cache directory (default ``~/.cache/hypermc``).
CACHE_ENV = "HYPERMC_CACHE"
#: Bumped whenever the closure computation or the cache layout changes, so that old
#: cached results are not reused.
CACHE_VERSION = 1
#: Standard place of the WordNet dict directory on Debian/Ubuntu (``wordnet-base``).
DEBIAN_WORDNET_DIR = "/usr/share/wordnet"
#: WordNet's own variable for its dict directory, honoured before the Debian default.
WNSEARCHDIR_ENV = "WNSEARCHDIR"

#: Files the nltk reader opens while it is constructed (it needs all four parts of
#: speech even for noun closures).
_REQUIRED_FILES = (
    "data.noun", "data.verb", "data.adj", "data.adv",
    "index.noun", "index.verb", "index.adj", "index.adv",
    "noun.exc", "verb.exc", "adj.exc", "adv.exc",
)  # fmt: skip
#: Copied along when present: nltk reads them lazily (sense keys, tag counts).
_OPTIONAL_FILES = ("index.sense", "cntlist.rev", "lexnames")
#: The files the closure depends on (names come from index.noun, relations from
#: data.noun); their SHA-256 keys the result cache.
_KEY_FILES = ("data.noun", "index.noun")

#: The 45 WordNet lexicographer files, numbered 00-44 (lexnames(5WN)). Debian does not
#: ship the ``lexnames`` file that nltk needs, so it is written from this list.
_LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food "
    "noun.group noun.location noun.motive noun.object noun.person noun.phenomenon "
    "noun.plant noun.possession noun.process noun.quantity noun.relation noun.shape "
    "noun.state noun.substance noun.time verb.body verb.change verb.cognition "
    "verb.communication verb.competition verb.consumption verb.contact verb.creation "
    "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative "
    "verb.weather adj.ppl"
).split()
#: Syntactic category numbers of the lexnames file.
_LEX_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}

_INSTALL_HINT = (
    "Install it with `apt-get install wordnet-base wordnet-sense-index` (Debian/Ubuntu) "
    "or `python -c \"import nltk; nltk.download('wordnet')\"`, or pass wordnet_dir= a "
    "WordNet 3.0 dict directory."
)
_NOUN_SYNSET = re.compile(r"^.+\.n\.\d+$")


class WordNetNotFoundError(LookupError, FileNotFoundError):
    """WordNet 3.0 is not installed where hypermc looks (the message says how to fix it).

    A :class:`LookupError` like nltk's own missing-resource error, and a
    :class:`FileNotFoundError`.

    Example:
        >>> try:
        ...     wordnet_closure(wordnet_dir="no-such-dir")
        ... except FileNotFoundError as exc:
        ...     print(type(exc).__name__, "-", str(exc).split(":")[0])
        WordNetNotFoundError - WordNet 3.0 not found in wordnet_dir='no-such-dir'
    """


def wordnet_closure(
    root: str | None = MAMMAL_ROOT,
    *,
    wordnet_dir: str | os.PathLike[str] | None = None,
    legacy: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> Graph:
    """Transitive closure of the WordNet noun hierarchy, child -> ancestor.

    With ``root=None``: every noun synset (82,115 nodes, 743,086 edges for WordNet 3.0).
    With a synset name: the nodes ``M`` = every ``a`` with an edge ``(a, root)`` in the
    all-noun closure, plus ``root``; the edges of the all-noun closure with both ends in
    ``M``. For ``root="mammal.n.01"`` the benchmark's filter then drops the edges whose
    parent is in :data:`MAMMAL_DROP_PARENTS` or whose child is in
    :data:`MAMMAL_DROP_CHILDREN` (1,180 nodes, 6,540 edges); ``legacy=True`` keeps the
    edge :data:`LEGACY_MAMMAL_EDGE` as the seed paper's data did (1,181 nodes, 6,541
    edges). Nodes are the names that occur in the edges; ids follow sorted names.

    Where WordNet is read from, first match wins:

    1. ``wordnet_dir``, a WordNet 3.0 dict directory (``data.noun``, ``index.noun``, ...);
    2. nltk's ``corpora/wordnet`` on ``nltk.data.path`` (``nltk.download('wordnet')``);
    3. ``$WNSEARCHDIR``, then ``/usr/share/wordnet`` (Debian ``wordnet-base``).

    nltk >= 3.10 only reads corpora below a directory on its data path and refuses
    linked files, so a dict directory (1. or 3.) is copied to
    ``<cache_dir>/corpora/wordnet/`` (about 35 MB, once; a ``lexnames`` file is written
    when missing, as in Debian). While the closure is built, ``<cache_dir>`` is appended
    to ``nltk.data.path``; it is removed again before this function returns.

    The result is cached as a CSV file under ``<cache_dir>/closures/``, keyed by the
    SHA-256 of ``data.noun`` and ``index.noun``, the root and ``legacy``. Building the
    all-noun closure takes about 10-20 s; later calls load the CSV.

    Args:
        root: synset name such as ``"mammal.n.01"``, or ``None`` for all nouns.
        wordnet_dir: WordNet dict directory to read instead of searching.
        legacy: add :data:`LEGACY_MAMMAL_EDGE` (only with ``root="mammal.n.01"``).
        cache_dir: cache directory; default ``$HYPERMC_CACHE`` or ``~/.cache/hypermc``.
        progress: show a tqdm bar over the noun synsets while the all-noun closure is
            built (on stderr; a cached closure loads without one).

    Returns:
        Graph: deterministic ids and edges (independent of hash seed and run).

    Raises:
        WordNetNotFoundError: WordNet is not found (the message says how to install it).
        ValueError: ``root`` is not a noun synset of this WordNet, or ``legacy`` is set
            with another root.

    Example:
        >>> g = wordnet_closure("mammal.n.01")  # doctest: +SKIP
        >>> g.num_nodes, g.num_edges, g.checksum()[:8]  # doctest: +SKIP
        (1180, 6540, 'f5e7d8fb')

        A root is checked before WordNet is looked for:

        >>> wordnet_closure("mammal")
        Traceback (most recent call last):
        ...
        ValueError: wordnet_closure: root must name a noun synset like 'mammal.n.01', got 'mammal'
    """
    if root is not None and not isinstance(root, str):
        raise TypeError(f"wordnet_closure: root must be a synset name (str) or None, got {type(root).__name__}")
    if root is not None and not _NOUN_SYNSET.match(root):
        raise ValueError(f"wordnet_closure: root must name a noun synset like 'mammal.n.01', got {root!r}")
    if legacy and root != MAMMAL_ROOT:
        raise ValueError(f"wordnet_closure: legacy=True only applies to root={MAMMAL_ROOT!r}, got root={root!r}")
    cache = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    source = _locate_wordnet(wordnet_dir)
    results = cache / "closures" / f"v{CACHE_VERSION}-{_source_key(source)}"

    target = results / _result_filename(root, legacy)
    if target.exists():
        return load_edges(target)
    nouns_file = results / _result_filename(None, False)
    if nouns_file.exists():
        nouns = load_edges(nouns_file)
    else:
        nouns = _build_noun_closure(source, cache, progress)
        _write_atomic(nouns, nouns_file)
    if root is None:
        return nouns
    graph = _subtree_closure(nouns, root, legacy)
    _write_atomic(graph, target)
    return graph


def load_mammals(legacy: bool = False) -> Graph:
    """The WordNet 3.0 mammal closure shipped with hypermc (no WordNet needed).

    Equal to ``wordnet_closure("mammal.n.01", legacy=legacy)``: 1,180 nodes and 6,540
    edges, or 1,181 and 6,541 with ``legacy=True`` (the seed paper's data, which also
    has the edge :data:`LEGACY_MAMMAL_EDGE`).

    Args:
        legacy: add :data:`LEGACY_MAMMAL_EDGE`.

    Returns:
        Graph: the closure, edges child -> ancestor.

    Example:
        >>> g = load_mammals()
        >>> g.num_nodes, g.num_edges, g.checksum()[:8]
        (1180, 6540, 'f5e7d8fb')
        >>> ("dog.n.01", "mammal.n.01") in set(g.pairs())
        True
    """
    resource = importlib.resources.files(__package__) / MAMMAL_CSV
    with importlib.resources.as_file(resource) as path:
        graph = load_edges(path)
    if legacy:
        graph = Graph.from_pairs([*graph.pairs(), LEGACY_MAMMAL_EDGE])
    return graph


# ---------------------------------------------------------------------- closure


def _subtree_closure(nouns: Graph, root: str, legacy: bool) -> Graph:
    """Restrict the all-noun closure to ``root``'s subtree (see :func:`wordnet_closure`)."""
    try:
        root_id = nouns.node_id(root)
    except KeyError:
        raise ValueError(f"wordnet_closure: {root!r} is not a noun synset of this WordNet") from None
    child, parent = nouns.edges[:, 0], nouns.edges[:, 1]
    members = torch.zeros(nouns.num_nodes, dtype=torch.bool)
    members[child[parent == root_id]] = True
    members[root_id] = True
    keep = members[child] & members[parent]
    names = nouns.names
    pairs = [(names[c], names[p]) for c, p in nouns.edges[keep].tolist()]
    if root == MAMMAL_ROOT:
        kept = [(c, p) for c, p in pairs if p not in MAMMAL_DROP_PARENTS and c not in MAMMAL_DROP_CHILDREN]
        if legacy:
            # pack_animal.n.01 is not a mammal: the edge comes from the all-noun closure.
            if not _has_edge(nouns, *LEGACY_MAMMAL_EDGE):
                raise ValueError(
                    f"wordnet_closure: legacy=True needs the edge {LEGACY_MAMMAL_EDGE}, which this WordNet's noun closure lacks"
                )
            kept.append(LEGACY_MAMMAL_EDGE)
        pairs = kept
    return Graph.from_pairs(pairs)


def _has_edge(graph: Graph, child: str, parent: str) -> bool:
    """True if ``graph`` has the edge ``child -> parent``."""
    try:
        edge = torch.tensor([graph.node_id(child), graph.node_id(parent)])
    except KeyError:
        return False
    return bool((graph.edges == edge).all(dim=1).any())


def _noun_closure_pairs(
    hypernyms: dict[str, list[str]],
    instance_hypernyms: dict[str, list[str]],
    instances: list[str],
) -> set[tuple[str, str]]:
    """The all-noun closure edges from the direct relations (pure, no WordNet access).

    Args:
        hypernyms: synset name -> names of its direct hypernyms, for every noun synset.
        instance_hypernyms: synset name -> its direct instance hypernyms.
        instances: every synset that is an instance hyponym of some synset.
    """
    ancestors: dict[str, frozenset[str]] = {}

    def closure(start: str, relation: dict[str, list[str]]) -> set[str]:
        # Everything reachable in one or more steps (the set nltk's Synset.closure
        # yields); ``start`` itself is left out even when a cycle leads back to it.
        seen: set[str] = set()
        frontier = list(relation.get(start, ()))
        while frontier:
            node = frontier.pop()
            if node in seen:
                continue
            seen.add(node)
            frontier.extend(relation.get(node, ()))
        seen.discard(start)
        return seen

    for name in hypernyms:
        ancestors[name] = frozenset(closure(name, hypernyms))
    edges = {(name, h) for name, hs in ancestors.items() for h in hs}
    for instance in instances:
        for h in closure(instance, instance_hypernyms):
            edges.add((instance, h))
            edges.update((instance, g) for g in ancestors.get(h, ()))
    edges.difference_update({(a, b) for a, b in edges if a == b})
    return edges


def _build_noun_closure(source: _Source, cache: Path, progress: bool = False) -> Graph:
    """Read the direct noun relations through nltk and close them."""
    hypernyms: dict[str, list[str]] = {}
    instance_hypernyms: dict[str, list[str]] = {}
    instances: list[str] = []
    with _wordnet_reader(source, cache) as reader, progress_bar(progress, unit="synset", desc="closure") as bar:
        for synset in reader.all_synsets("n"):
            name = synset.name()
            hypernyms[name] = [h.name() for h in synset.hypernyms()]
            instance_hypernyms[name] = [h.name() for h in synset.instance_hypernyms()]
            instances.extend(i.name() for i in synset.instance_hyponyms())
            bar.update(1)
    return Graph.from_pairs(_noun_closure_pairs(hypernyms, instance_hypernyms, instances))


# ---------------------------------------------------------------------- locating WordNet


@dataclass(frozen=True)
class _Source:
    """Where WordNet is: a dict directory (``path``) or an nltk corpus root (``pointer``)."""

    path: Path | None = None
    pointer: Any = None  # nltk.data.PathPointer

    def read_bytes(self, filename: str) -> bytes:
        if self.path is not None:
            return (self.path / filename).read_bytes()
        with self.pointer.join(filename).open() as f:
            return f.read()


def _locate_wordnet(wordnet_dir: str | os.PathLike[str] | None) -> _Source:
    """Find WordNet (order documented in :func:`wordnet_closure`)."""
    if wordnet_dir is not None:
        path = Path(wordnet_dir)
        missing = [name for name in _REQUIRED_FILES if not (path / name).is_file()]
        if missing:
            raise WordNetNotFoundError(
                f"WordNet 3.0 not found in wordnet_dir={os.fspath(wordnet_dir)!r}: missing {', '.join(missing)}. {_INSTALL_HINT}"
            )
        return _Source(path=path)
    pointer = _find_nltk_wordnet()
    if pointer is not None:
        return _Source(pointer=pointer)
    candidates = [os.environ.get(WNSEARCHDIR_ENV), DEBIAN_WORDNET_DIR]
    for candidate in candidates:
        if candidate and all((Path(candidate) / n).is_file() for n in _REQUIRED_FILES):
            return _Source(path=Path(candidate))
    raise WordNetNotFoundError(
        "WordNet 3.0 not found: nltk has no corpora/wordnet on nltk.data.path and "
        f"{DEBIAN_WORDNET_DIR} (or ${WNSEARCHDIR_ENV}) holds no WordNet dict. "
        f"{_INSTALL_HINT}"
    )


def _import_nltk() -> Any:
    """nltk (its WordNet reader parses the dict files), or an ImportError saying so."""
    try:
        import nltk
    except ImportError:
        raise ImportError(
            "wordnet_closure needs nltk to read WordNet (pip install nltk); load_mammals() needs neither nltk nor WordNet"
        ) from None
    return nltk


def _find_nltk_wordnet() -> Any:
    """nltk's own WordNet (``corpora/wordnet`` or ``corpora/wordnet.zip``), else None."""
    nltk = _import_nltk()

    # The resource names nltk's own ``nltk.corpus.wordnet`` loader tries, in its order.
    for resource in ("corpora/wordnet.zip/wordnet/", "corpora/wordnet"):
        try:
            pointer = nltk.data.find(resource)
            with pointer.join(_REQUIRED_FILES[0]).open():
                pass
        except (LookupError, OSError, ValueError):
            continue
        return pointer
    return None


def _source_key(source: _Source) -> str:
    """First 16 hex digits of SHA-256 over the files the closure depends on."""
    digest = hashlib.sha256()
    for filename in _KEY_FILES:
        data = source.read_bytes(filename)
        digest.update(f"{filename}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def _default_cache_dir() -> Path:
    """``$HYPERMC_CACHE``, else ``~/.cache/hypermc``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "hypermc"


def _result_filename(root: str | None, legacy: bool) -> str:
    """Cache file name for one closure; readable where the name allows it."""
    if root is None:
        return "nouns.csv"
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", root)
    digest = hashlib.sha256(root.encode("utf-8")).hexdigest()[:8]
    return f"{stem}-{digest}{'-legacy' if legacy else ''}.csv"


def _write_atomic(graph: Graph, target: Path) -> None:
    """Write ``graph`` as CSV to ``target`` through a temporary file and a rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        graph.to_csv(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# ---------------------------------------------------------------------- the nltk reader


@contextlib.contextmanager
def _wordnet_reader(source: _Source, cache: Path) -> Iterator[Any]:
    """An nltk WordNet reader for ``source``, closed (and nltk.data.path restored) on exit."""
    nltk = _import_nltk()

    added = None
    if source.pointer is not None:
        root = source.pointer
    else:
        assert source.path is not None  # a _Source holds a path or a pointer
        root = os.fspath(_corpus_copy(source.path, cache))
        added = os.fspath(cache.resolve())
        nltk.data.path.append(added)
    reader = None
    try:
        with warnings.catch_warnings():
            # Without the Open Multilingual WordNet nltk warns that multilingual
            # functions are unavailable; the closure does not use them.
            warnings.filterwarnings("ignore", message="The multilingual functions", category=UserWarning)
            reader = _reader_class()(root, None)
        yield reader
    finally:
        if reader is not None:
            _close_reader(reader)
        if added is not None:
            with contextlib.suppress(ValueError):
                nltk.data.path.remove(added)


@functools.cache
def _reader_class() -> type:
    """nltk's WordNet reader minus the version mapping (nltk is imported on first use)."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class ClosureReader(WordNetCorpusReader):
        """nltk's reader without the WordNet-version mapping it builds on construction.

        ``map_wn`` maps synsets of nltk's packaged WordNet onto the loaded one for the
        Open Multilingual WordNet; it takes most of the construction time and opens
        ``corpora/wordnet/index.sense`` through nltk.data.path. Closures never need it.
        """

        def map_wn(self, version: str = "wordnet") -> None:
            return None

    return ClosureReader


def _close_reader(reader: Any) -> None:
    """Close the file handles nltk's reader keeps open (it has no close method)."""
    handles = list(getattr(reader, "_data_file_map", {}).values())
    handles += [getattr(reader, "_key_count_file", None), getattr(reader, "_key_synset_file", None)]
    for handle in handles:
        if handle is not None:
            with contextlib.suppress(Exception):
                handle.close()


def _corpus_copy(src: Path, cache: Path) -> Path:
    """``<cache>/corpora/wordnet``: a private copy of the dict directory ``src``.

    Reused while every file matches its source in size and modification time; else
    rebuilt in a temporary directory and swapped in by rename. Writes ``lexnames`` when
    the source has none.
    """
    corpora = cache / "corpora"
    dest = corpora / "wordnet"
    files = [n for n in (*_REQUIRED_FILES, *_OPTIONAL_FILES) if (src / n).is_file()]
    if _copy_is_current(src, dest, files):
        return dest
    corpora.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=corpora, prefix=".wordnet-"))
    try:
        for name in files:
            # A byte copy, never a link: nltk refuses symlinked and hard-linked files.
            shutil.copyfile(src / name, tmp / name)
            os.chmod(tmp / name, 0o644)
            st = os.stat(src / name)
            os.utime(tmp / name, ns=(st.st_atime_ns, st.st_mtime_ns))
        if "lexnames" not in files:
            (tmp / "lexnames").write_text(_lexnames_text(), encoding="ascii")
            os.chmod(tmp / "lexnames", 0o644)
        os.chmod(tmp, 0o755)
        if dest.exists():
            old = Path(tempfile.mkdtemp(dir=corpora, prefix=".wordnet-old-"))
            with contextlib.suppress(OSError):
                os.replace(dest, old / "wordnet")
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, dest)
        except OSError:
            # Another process installed its copy first; keep it if it is current.
            if not _copy_is_current(src, dest, files):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _copy_is_current(src: Path, dest: Path, files: list[str]) -> bool:
    """True if ``dest`` holds ``files`` with the sizes and mtimes of those in ``src``."""
    if not (dest / "lexnames").is_file():
        return False
    for name in files:
        try:
            a, b = os.stat(src / name), os.stat(dest / name)
        except OSError:
            return False
        if a.st_size != b.st_size or a.st_mtime_ns != b.st_mtime_ns:
            return False
    return True


def _lexnames_text() -> str:
    """The standard ``lexnames`` file: ``NN<TAB>name<TAB>category`` per line."""
    return "".join(f"{i:02d}\t{name}\t{_LEX_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(_LEXNAMES))
