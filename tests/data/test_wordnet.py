"""Tests for hypermc.data.wordnet: closure counts and checksums, caching, determinism.

Tests that read WordNet skip when it is not installed. They use the default cache
(``$HYPERMC_CACHE`` or ``~/.cache/hypermc``), so the all-noun closure is built once per
machine and cache version; ``test_fresh_build_is_independent_of_hash_seed`` (marked
``slow``) builds it from scratch in a subprocess every time, so the build itself is
always checked against the pinned checksum.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

# nltk is an optional dependency (not in the test extra): skip the module, not fail
# collection, where it is missing
nltk = pytest.importorskip("nltk")

import hypermc.data.wordnet as wordnet  # noqa: E402
from hypermc.data import Graph, WordNetNotFoundError, load_edges, load_mammals, wordnet_closure  # noqa: E402

NOT_FOUND = "WordNet 3.0 not found: apt-get install wordnet-base wordnet-sense-index"
REPO = Path(__file__).resolve().parents[2]

MAMMALS = (1180, 6540, "f5e7d8fb3f3e18184a3ace8bdb79ea6f92467d19c7f9ca9682433575cff6ff7c")
MAMMALS_LEGACY = (1181, 6541, "447fc4ef39f08117e8d997bafe838647547f40866015f7da5aa15e6aaeef946b")
NOUNS = (82115, 743086)


def summary(graph: Graph) -> tuple[int, int, str]:
    return graph.num_nodes, graph.num_edges, graph.checksum()


@pytest.fixture(scope="session")
def mammals() -> Graph:
    try:
        return wordnet_closure("mammal.n.01")
    except WordNetNotFoundError:
        pytest.skip(NOT_FOUND)


@pytest.fixture(scope="session")
def wordnet_source(mammals: Graph) -> wordnet._Source:
    return wordnet._locate_wordnet(None)


# ---------------------------------------------------------------------- without WordNet


def test_shipped_copies_are_identical() -> None:
    package = REPO / "hypermc" / "data"
    for name in ("mammal_closure.csv", "NOTICE.wordnet"):
        assert (REPO / "data" / name).read_bytes() == (package / name).read_bytes(), name


def test_load_mammals_counts_and_checksums() -> None:
    assert summary(load_mammals()) == MAMMALS
    legacy = load_mammals(legacy=True)
    assert summary(legacy) == MAMMALS_LEGACY
    assert legacy.node_id("pack_animal.n.01") >= 0


def test_shipped_csv_is_sorted_with_header() -> None:
    lines = (REPO / "data" / "mammal_closure.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "child,parent"
    assert lines[1:] == [f"{c},{p}" for c, p in load_mammals().pairs()]


def test_noun_closure_semantics_on_a_toy_hierarchy() -> None:
    hypernyms = {"a": ["b"], "b": ["c"], "c": [], "i": [], "j": [], "x": ["y"], "y": ["x"]}
    instance_hypernyms = {"i": ["a"], "j": ["i"]}
    pairs = wordnet._noun_closure_pairs(hypernyms, instance_hypernyms, ["i", "j"])
    assert pairs == {
        ("a", "b"), ("a", "c"), ("b", "c"),
        ("i", "a"), ("i", "b"), ("i", "c"),  # instance: its class and the class's ancestors
        ("j", "i"), ("j", "a"), ("j", "b"), ("j", "c"),  # through instance_hypernyms closure
        ("x", "y"), ("y", "x"),  # a cycle gives no self-loops
    }  # fmt: skip


def test_lexnames_file() -> None:
    lines = wordnet._lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3"
    assert lines[3] == "03\tnoun.Tops\t1"
    assert lines[29] == "29\tverb.body\t2"
    assert lines[44] == "44\tadj.ppl\t3"


def test_not_found_error_for_empty_wordnet_dir(tmp_path: Path) -> None:
    install = "apt-get install wordnet-base wordnet-sense-index"
    with pytest.raises(WordNetNotFoundError, match=install) as info:
        wordnet_closure(wordnet_dir=tmp_path, cache_dir=tmp_path / "cache")
    assert isinstance(info.value, LookupError) and isinstance(info.value, FileNotFoundError)
    message = str(info.value)
    assert "missing data.noun" in message and str(tmp_path) in message
    assert "nltk.download('wordnet')" in message


def test_not_found_error_when_nothing_is_installed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    monkeypatch.delenv("NLTK_DATA", raising=False)
    monkeypatch.delenv("WNSEARCHDIR", raising=False)
    monkeypatch.setattr(wordnet, "DEBIAN_WORDNET_DIR", str(tmp_path))
    with pytest.raises(WordNetNotFoundError, match=r"WordNet 3\.0 not found: .*apt-get install"):
        wordnet_closure("mammal.n.01", cache_dir=tmp_path / "cache")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"root": "run.v.01"}, ValueError, "must name a noun synset like 'mammal.n.01'"),
        ({"root": 3}, TypeError, "root must be a synset name"),
        ({"root": "dog.n.01", "legacy": True}, ValueError, "legacy=True only applies"),
        ({"root": None, "legacy": True}, ValueError, "legacy=True only applies"),
    ],
)
def test_argument_errors(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        wordnet_closure(**kwargs)


# ---------------------------------------------------------------------- with WordNet


def test_mammal_closure(mammals: Graph) -> None:
    assert summary(mammals) == MAMMALS
    assert mammals.edges.dtype == torch.int64
    assert list(mammals.names) == sorted(mammals.names)
    # every node but the root reaches the root
    root = mammals.node_id("mammal.n.01")
    children = set(mammals.edges[mammals.edges[:, 1] == root, 0].tolist())
    assert children == set(range(mammals.num_nodes)) - {root}


def test_mammal_closure_legacy(mammals: Graph) -> None:
    legacy = wordnet_closure("mammal.n.01", legacy=True)
    assert summary(legacy) == MAMMALS_LEGACY
    assert set(legacy.pairs()) - set(mammals.pairs()) == {("packhorse.n.01", "pack_animal.n.01")}


def test_shipped_csv_equals_generated_closure(mammals: Graph, tmp_path: Path) -> None:
    assert load_mammals() == mammals
    assert load_mammals(legacy=True) == wordnet_closure("mammal.n.01", legacy=True)
    mammals.to_csv(tmp_path / "m.csv")
    shipped = REPO / "hypermc" / "data" / "mammal_closure.csv"
    assert (tmp_path / "m.csv").read_bytes() == shipped.read_bytes()


def test_all_nouns(mammals: Graph) -> None:
    nouns = wordnet_closure(None)
    assert (nouns.num_nodes, nouns.num_edges) == NOUNS
    assert nouns.node_id("entity.n.01") >= 0
    # the mammal closure is the filtered restriction of the noun closure
    assert set(mammals.pairs()) <= set(nouns.pairs())


def test_other_roots_and_unknown_root(mammals: Graph) -> None:
    dogs = wordnet_closure("dog.n.01")
    root = dogs.node_id("dog.n.01")
    assert dogs.num_nodes > 100 and set(dogs.edges[:, 1].tolist()) <= set(range(dogs.num_nodes))
    assert int((dogs.edges[:, 1] == root).sum()) == dogs.num_nodes - 1
    with pytest.raises(ValueError, match="'unicorn_horse.n.01' is not a noun synset"):
        wordnet_closure("unicorn_horse.n.01")


def test_result_is_cached_as_csv(mammals: Graph, tmp_path: Path, monkeypatch) -> None:
    cache = Path(os.environ.get("HYPERMC_CACHE") or Path.home() / ".cache" / "hypermc")
    files = sorted(cache.glob(f"closures/v{wordnet.CACHE_VERSION}-*/mammal.n.01-*.csv"))
    assert files, "the mammal closure should be cached"
    assert any(load_edges(f) == mammals for f in files)

    def no_build(*args, **kwargs):
        raise AssertionError("rebuilt instead of reading the cache")

    monkeypatch.setattr(wordnet, "_build_noun_closure", no_build)
    assert wordnet_closure("mammal.n.01") == mammals


def test_corpus_copy_for_nltk(wordnet_source, tmp_path: Path) -> None:
    if wordnet_source.path is None:
        pytest.skip("WordNet comes from nltk_data here, no dict directory to copy")
    dest = wordnet._corpus_copy(wordnet_source.path, tmp_path)
    assert dest == tmp_path / "corpora" / "wordnet"
    for name in ("data.noun", "index.noun", "lexnames"):
        st = os.lstat(dest / name)
        assert st.st_nlink == 1 and not (dest / name).is_symlink()  # nltk refuses links
        assert st.st_mode & 0o022 == 0  # nltk refuses group/world-writable files
    mtime = os.stat(dest / "data.noun").st_mtime_ns
    assert wordnet._corpus_copy(wordnet_source.path, tmp_path) == dest  # reused
    assert os.stat(dest / "data.noun").st_mtime_ns == mtime

    before = list(nltk.data.path)
    with wordnet._wordnet_reader(wordnet._Source(path=wordnet_source.path), tmp_path) as reader:
        assert str(tmp_path.resolve()) in nltk.data.path
        mammal = reader.synset("mammal.n.01")
        assert "vertebrate.n.01" in {h.name() for h in mammal.hypernyms()}
    assert nltk.data.path == before  # global nltk state restored


@pytest.mark.parametrize("layout", ["directory", "zip"])
def test_nltk_data_install_is_found(wordnet_source, tmp_path: Path, monkeypatch, layout) -> None:
    """An nltk_data tree (as ``nltk.download('wordnet')`` leaves it) is used in place."""
    if wordnet_source.path is None:
        pytest.skip("WordNet already comes from nltk_data here")
    data = tmp_path / "nltk_data"
    dest = wordnet._corpus_copy(wordnet_source.path, data)  # data/corpora/wordnet/
    if layout == "zip":
        with zipfile.ZipFile(data / "corpora" / "wordnet.zip", "w") as archive:
            for file in sorted(dest.iterdir()):
                archive.write(file, f"wordnet/{file.name}")
        shutil.rmtree(dest)
    monkeypatch.setattr(nltk.data, "path", [str(data)])
    source = wordnet._locate_wordnet(None)
    assert source.pointer is not None
    assert wordnet._source_key(source) == wordnet._source_key(wordnet_source)
    with wordnet._wordnet_reader(source, tmp_path / "unused") as reader:
        assert "pack_animal.n.01" in {h.name() for h in reader.synset("packhorse.n.01").hypernyms()}
    assert nltk.data.path == [str(data)]
    assert not (tmp_path / "unused").exists()  # nothing copied


@pytest.mark.slow  # ~17 s of CPU; 40-60 s wall on a busy 2-core machine
def test_fresh_build_is_independent_of_hash_seed(mammals: Graph, tmp_path: Path) -> None:
    """Build from scratch (empty cache) in a subprocess with another hash seed: same bytes."""
    out = tmp_path / "fresh.csv"
    code = "import sys; from hypermc.data import wordnet_closure; wordnet_closure('mammal.n.01', cache_dir=sys.argv[1]).to_csv(sys.argv[2])"
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "cache"), str(out)],
        env=env, check=True, timeout=600,
    )  # fmt: skip
    fresh = load_edges(out)
    assert fresh == mammals
    assert summary(fresh) == MAMMALS
    assert out.read_bytes() == (REPO / "data" / "mammal_closure.csv").read_bytes()
