"""The manifold registry: a model defined and registered here (and nowhere else in the
library) reaches the CLI, configs and checkpoints, the trainer, the constructions and the
plots; and no code outside :mod:`hypermc.manifolds` decides per model with ``isinstance``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

import hypermc as hm
from hypermc.__main__ import _parser, main
from hypermc.embed import embed_closure, embed_tree, load_checkpoint, train
from hypermc.embed.plot import plot_embedding
from hypermc.embed.train import MANIFOLDS, manifold_from_config
from hypermc.manifolds import Euclidean, Lorentz, PoincareBall, PoincareHalfspace, Sphere, convert, registered_manifolds
from hypermc.manifolds.registry import (
    ball_models,
    check_ball_model,
    manifold_class,
    manifold_from_name,
    manifold_name,
    register_manifold,
    unregister_manifold,
)
from tests.embed.helpers import tree_closure

F64 = torch.float64
ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = {"ball": PoincareBall, "euclidean": Euclidean, "halfspace": PoincareHalfspace, "lorentz": Lorentz}
TOY = dict(nc=2, dtype=F64, epochs=2, burnin=0, lr=1.0, negatives=2, batch_size=8, progress=False)


class SmallBall(PoincareBall):
    """A scaled copy of the ball: curvature -4 (radius 1/2) unless told otherwise."""

    name = "small_ball"

    def __init__(self, *, curvature: float = -4.0) -> None:
        super().__init__(curvature=curvature)


class Hyperboloid(Lorentz):
    """A copy of the Lorentz model under its own name (one stored coordinate more than its dimension)."""

    name = "hyperboloid"


@pytest.fixture
def new_models():
    """SmallBall and Hyperboloid registered for one test (the library's files unchanged)."""
    register_manifold(SmallBall)
    register_manifold(Hyperboloid)
    try:
        yield SmallBall, Hyperboloid
    finally:
        unregister_manifold("small_ball")
        unregister_manifold("hyperboloid")


def _choices(command: str) -> list[str]:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return next(a for a in sub.choices[command]._actions if a.dest == "manifold").choices


# ------------------------------------------------------------------- the registry


def test_the_built_in_models_are_registered():
    assert registered_manifolds() == BUILT_IN
    assert list(ball_models()) == ["ball", "halfspace", "lorentz"]
    assert dict(MANIFOLDS) == BUILT_IN  # the trainer's name table is the registry
    assert _choices("train") == ["ball", "euclidean", "halfspace", "lorentz"]
    assert _choices("construct") == ["ball", "halfspace", "lorentz"]


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_names_round_trip_through_configs(name):
    cls = BUILT_IN[name]
    kwargs = {} if name == "euclidean" else {"curvature": -2.5}
    M = manifold_from_name(name, **kwargs)
    assert type(M) is cls and manifold_name(M) == name == cls.name
    config = {"manifold": name, "curvature": float(M.curvature)}
    assert manifold_from_config(config) == M


def test_what_each_model_declares():
    assert [PoincareBall().point_size(5), Lorentz().point_size(5), Lorentz().manifold_dim(6)] == [5, 6, 5]
    assert [cls.boundary_cancellation for cls in (PoincareHalfspace, PoincareBall, Lorentz)] == [False, True, True]
    assert [cls.identity_metric for cls in BUILT_IN.values()] == [False, True, False, False]
    assert Euclidean.config_args == () and PoincareBall.config_args == ("curvature",)
    assert PoincareHalfspace.fused_dist_batch is not None and PoincareBall.fused_dist_batch is not None
    assert Lorentz.fused_dist_batch is not None and Euclidean.fused_dist_batch is None


@pytest.mark.parametrize("K", [-1.0, -3.0])
def test_the_maps_are_the_converters_bit_for_bit(K):
    """The models' maps are the functions of :mod:`hypermc.manifolds.convert` (the numbers of
    the constructions and plots that called them directly)."""
    gen = torch.Generator().manual_seed(0)
    B, H, L = PoincareBall(curvature=K), PoincareHalfspace(curvature=K), Lorentz(curvature=K)
    b = B.random(5, 3, nc=2, dtype=F64, generator=gen)
    h, x = convert.ball_to_halfspace(b, curvature=K), convert.ball_to_lorentz(b, curvature=K)
    pairs = [
        (B.to_ball(b), b),
        (B.to_halfspace(b), h),
        (B.from_halfspace(h), convert.halfspace_to_ball(h, curvature=K)),
        (H.to_ball(h), convert.halfspace_to_ball(h, curvature=K)),
        (H.from_ball(b), h),
        (H.to_halfspace(h), h),
        (L.to_ball(x), convert.lorentz_to_ball(x, curvature=K)),
        (L.from_ball(b), x),
        (L.to_halfspace(x), convert.lorentz_to_halfspace(x, curvature=K)),
        (L.from_halfspace(h), convert.halfspace_to_lorentz(h, curvature=K)),
    ]
    for got, want in pairs:
        assert torch.equal(got.components, want.components)


def test_unknown_names_say_what_is_registered():
    registered = r"'ball', 'euclidean', 'halfspace', 'lorentz' \(the registered manifolds\)"
    with pytest.raises(ValueError, match=rf"^manifold_from_name: name must be one of {registered}; got 'poincare'\. .*register_manifold$"):
        manifold_from_name("poincare")
    with pytest.raises(ValueError, match=rf"^manifold_from_config: config\['manifold'\] must be one of {registered}; got 'sphere'"):
        manifold_from_config({"manifold": "sphere", "curvature": 1.0})
    with pytest.raises(ValueError, match=rf"^manifold_class: name must be one of {registered}; got None"):
        manifold_class(None)
    with pytest.raises(ValueError, match=rf"^unregister_manifold: name must be one of {registered}; got 'x'"):
        unregister_manifold("x")
    classes = "PoincareBall, Euclidean, PoincareHalfspace, Lorentz"
    with pytest.raises(TypeError, match=rf"^train: manifold must be one of {classes} \(the registered manifolds\); got Sphere$"):
        train(tree_closure(1, 2), Sphere(), epochs=1)
    ball = "PoincareBall, PoincareHalfspace or Lorentz"
    with pytest.raises(TypeError, match=rf"^manifold: expected {ball} \(a model with a map to the Poincaré ball\), got Euclidean$"):
        check_ball_model(Euclidean())
    ball = "PoincareBall, PoincareHalfspace, Lorentz"
    with pytest.raises(TypeError, match=rf"^Euclidean.to_ball: Euclidean has no map to the Poincaré ball .*: {ball}$"):
        Euclidean().to_ball(torch.zeros(2))


def test_the_cli_refuses_unknown_names(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--manifold", "poincare", "--out", "x"])
    assert exit_.value.code == 2
    assert "argument --manifold: invalid choice: 'poincare' (choose from" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["construct", "--manifold", "euclidean", "--out", "x"])
    assert "argument --manifold: invalid choice: 'euclidean'" in capsys.readouterr().err


def test_registration_checks():
    class Nameless(PoincareBall):  # inherits the name "ball"
        pass

    class Loud(PoincareBall):
        name = "Loud Ball"

    class Odd(PoincareBall):
        name = "odd"
        config_args = ("radius",)

    with pytest.raises(TypeError, match=r"^register_manifold: expected a subclass of hypermc.manifolds.Manifold; got <class 'int'>$"):
        register_manifold(int)
    with pytest.raises(ValueError, match=r"^register_manifold: the name 'ball' of Nameless is taken by PoincareBall; give Nameless"):
        register_manifold(Nameless)
    with pytest.raises(ValueError, match=r"^register_manifold: Loud.name must be lower-case letters, digits and '_'; got 'Loud Ball'$"):
        register_manifold(Loud)
    with pytest.raises(ValueError, match=r"^register_manifold: Odd.config_args names \['radius'\], which Odd\(\) does not take"):
        register_manifold(Odd)
    assert register_manifold(PoincareBall) is PoincareBall  # again: nothing changes
    assert registered_manifolds() == BUILT_IN
    with pytest.raises(TypeError, match=r"^manifold_name: manifold must be one of .*; got Nameless$"):
        manifold_name(Nameless())  # a subclass is registered on its own


# ---------------------------------------------------- a new model, no other file


def test_a_new_model_reaches_the_registry_and_the_cli(new_models):
    assert registered_manifolds()["small_ball"] is SmallBall and MANIFOLDS["hyperboloid"] is Hyperboloid
    assert manifold_from_name("small_ball") == SmallBall(curvature=-4.0)
    assert manifold_from_config({"manifold": "hyperboloid", "curvature": -2.0}) == Hyperboloid(curvature=-2.0)
    assert manifold_name(SmallBall()) == "small_ball"
    assert _choices("train") == ["ball", "euclidean", "halfspace", "hyperboloid", "lorentz", "small_ball"]
    assert _choices("construct") == ["ball", "halfspace", "hyperboloid", "lorentz", "small_ball"]
    with pytest.raises(TypeError, match=r"expected PoincareBall, PoincareHalfspace, Hyperboloid, Lorentz or SmallBall \(a model"):
        check_ball_model(Euclidean())


@pytest.mark.parametrize(("name", "width"), [("small_ball", 2), ("hyperboloid", 3)])
def test_a_new_model_trains_from_the_cli(new_models, name, width, tmp_path, capsys):
    csv, run = tmp_path / "toy.csv", tmp_path / "run"
    tree_closure(2, 2).to_csv(csv)
    args = ["train", "--data", str(csv), "--manifold", name, "--dim", "2", "--nc", "2", "--epochs", "2"]
    code = main([*args, "--burnin", "0", "--lr", "1", "--negatives", "2", "--batch-size", "8", "--out", str(run), "--quiet"])
    assert code == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["manifold"] == name and 0 < record["map"] <= 1
    ckpt = load_checkpoint(run / "checkpoint.pt")
    assert type(ckpt["manifold"]) is MANIFOLDS[name] and ckpt["config"]["manifold"] == name
    assert ckpt["embeddings"].shape == (7, width)  # the model's point_size(dim), in the trainer
    assert ckpt["manifold"].check_point(ckpt["embeddings"]) == (True, None)


def test_a_new_model_trains_constructs_and_plots(new_models, tmp_path):
    g = tree_closure(2, 2)
    small, hyper = SmallBall(), Hyperboloid()
    for M, width in ((small, 2), (hyper, 3)):
        r = train(g, M, dim=2, seed=0, **TOY)
        assert r.embeddings.shape == (g.num_nodes, width) and r.config["manifold"] == M.name
        fig = plot_embedding(M, r.embeddings, g, tmp_path / f"{M.name}.png")
        assert len(fig.axes) == 3
    # the closure construction runs in the half-space and lands in the new model, curvature -4
    ref = embed_closure(g, PoincareBall(curvature=-4.0), dim=3)
    got = embed_closure(g, small, dim=3)
    assert torch.equal(got["embeddings"].components, ref["embeddings"].components) and got["nc"] == ref["nc"]
    # the tree construction (curvature -1) in the hyperboloid copy: the Lorentz numbers
    ref = embed_tree(g, Lorentz(), tau=3.0)
    got = embed_tree(g, Hyperboloid(), tau=3.0)
    assert torch.equal(got["embeddings"].components, ref["embeddings"].components)
    assert got["embeddings"].shape == (g.num_nodes, 3)


# ------------------------------------------------ no per-model chains outside manifolds/

#: Where per-model behaviour must come from the model or the registry.
SCANNED = sorted([*(ROOT / "hypermc" / "embed").glob("*.py"), *(ROOT / "hypermc" / "optim").glob("*.py"), ROOT / "hypermc" / "__main__.py"])


def _model_class_names() -> list[str]:
    """The concrete model classes :mod:`hypermc.manifolds` exports."""
    exported = {n: getattr(hm.manifolds, n) for n in hm.manifolds.__all__}
    return sorted(n for n, v in exported.items() if isinstance(v, type) and issubclass(v, hm.manifolds.Manifold) and n != "Manifold")


def _per_model_tests(source: str) -> list[str]:
    """Lines that test ``isinstance``/``issubclass``/``type(...) is`` against a concrete
    model class, or compare with a registered name as a string literal."""
    classes = "|".join(_model_class_names())
    names = "|".join(map(re.escape, BUILT_IN))
    patterns = [
        rf"\b(isinstance|issubclass)\([^)]*\b({classes})\b",
        rf"\btype\([^)]*\)\s+(is|==|in)\s+\(?\s*({classes})\b",
        rf"(==|!=)\s*[\"']({names})[\"']",
        rf"[\"']({names})[\"']\s*(==|!=|in\b)",
    ]
    return [line.strip() for line in source.splitlines() if any(re.search(p, line) for p in patterns)]


def test_the_scan_finds_per_model_tests():
    lines = ["if isinstance(m, (PoincareBall, Lorentz)):", "if type(m) is Euclidean:", 'model = "ball" if x == "lorentz" else 1']
    src = "\n".join([*lines, "ok = isinstance(m, Manifold)"])
    assert _per_model_tests(src) == lines  # the base class check is not a per-model test
    assert {"PoincareBall", "PoincareHalfspace", "Lorentz", "Euclidean", "Stereographic"} <= set(_model_class_names())


def test_no_per_model_tests_outside_the_manifolds():
    assert len(SCANNED) > 10
    found = {str(p.relative_to(ROOT)): hits for p in SCANNED if (hits := _per_model_tests(p.read_text()))}
    assert not found, f"per-model isinstance / name tests outside hypermc/manifolds (ask the model or the registry): {found}"
