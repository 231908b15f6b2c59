"""TrainConfig: checked once, round-trips through dicts, JSON and checkpoints, and
``train(graph, manifold, config)`` is the same run as ``train(graph, manifold, **kwargs)``."""

from __future__ import annotations

import dataclasses
import doctest
import json
import subprocess
import sys

import pytest
import torch

import hypermc
import hypermc.embed.config as config_module
from hypermc.__main__ import main
from hypermc.embed import TrainConfig, load_checkpoint, train
from hypermc.embed.config import DEFAULT_INIT_STD, DEFAULTS, RECORD_KEYS
from hypermc.embed.distance import components_of
from hypermc.embed.sampler import MAX_ROUNDS
from hypermc.embed.train import CHECKPOINT_NAME, _content_hash, epoch_lr
from hypermc.manifolds import PoincareHalfspace
from tests.embed.helpers import tree_closure

F64 = torch.float64
#: A tiny run: 7 nodes, 6 edges, a few epochs.
TINY = dict(
    dim=2, nc=2, dtype=F64, epochs=3, lr=30.0, batch_size=4, negatives=5, burnin=1, max_step=0.3, lr_end_mult=0.01, scale=1.0, seed=4
)


def test_defaults_are_the_documented_ones():
    cfg = TrainConfig()
    assert {k: getattr(cfg, k) for k in DEFAULTS} == DEFAULTS
    assert (cfg.dim, cfg.nc, cfg.dtype, cfg.epochs, cfg.seed) == (2, 2, F64, 1000, 0)
    assert (cfg.init_std, cfg.max_rounds, cfg.retraction, cfg.fast) == (DEFAULT_INIT_STD, MAX_ROUNDS, True, False)
    assert (cfg.checkpoint_every, cfg.device) == (None, "cpu")


def test_values_are_normalised():
    cfg = TrainConfig(lr=10, scale=1, max_step=2, device=torch.device("cpu"))
    assert type(cfg.lr) is float and type(cfg.scale) is float and type(cfg.max_step) is float
    assert cfg.device == "cpu" and TrainConfig(device=None).device == "cpu"
    # the spelling is checked here, CUDA's presence when a run starts
    assert TrainConfig(device="cuda:1").device == "cuda:1" and TrainConfig(device="auto").device == "auto"
    assert TrainConfig(nc=None, max_step=None, checkpoint_every=5).nc is None


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(dim=0), ValueError, r"TrainConfig: dim must be an int >= 1; got 0"),
        (dict(dim=2.0), TypeError, r"TrainConfig: dim must be an int >= 1; got float 2.0"),
        (dict(nc=0), ValueError, r"TrainConfig: nc must be an int >= 1 or None \(plain tensors\); got 0"),
        (dict(nc="2"), TypeError, r"TrainConfig: nc must be an int >= 1 or None \(plain tensors\); got str '2'"),
        (dict(dtype=torch.int64), TypeError, r"TrainConfig: dtype must be one of float16, bfloat16, float32, float64"),
        (dict(dtype="float64"), TypeError, r"TrainConfig: dtype must be a torch.dtype .*; got str 'float64'"),
        (dict(epochs=-1), ValueError, r"TrainConfig: epochs must be an int >= 0; got -1"),
        (dict(lr=0.0), ValueError, r"TrainConfig: lr must be a finite number > 0.0; got 0.0"),
        (dict(lr=float("nan")), ValueError, r"TrainConfig: lr must be a finite number > 0.0; got nan"),
        (dict(lr="1"), TypeError, r"TrainConfig: lr must be a finite number > 0.0; got str '1'"),
        (dict(batch_size=0), ValueError, r"TrainConfig: batch_size must be an int >= 1; got 0"),
        (dict(negatives=True), TypeError, r"TrainConfig: negatives must be an int >= 1; got bool True"),
        (dict(near_negatives=-1), ValueError, r"TrainConfig: near_negatives must be an int >= 0; got -1"),
        (dict(negatives=5, near_negatives=6), ValueError, r"TrainConfig: near_negatives must be <= negatives \(5\); got 6"),
        (dict(burnin=-2), ValueError, r"TrainConfig: burnin must be an int >= 0; got -2"),
        (dict(burnin_lr_mult=-0.5), ValueError, r"TrainConfig: burnin_lr_mult must be a finite number > 0.0"),
        (dict(scale=float("inf")), ValueError, r"TrainConfig: scale must be a finite number > 0.0; got inf"),
        (dict(seed=1.5), TypeError, r"TrainConfig: seed must be an int; got float 1.5"),
        (dict(init_std=0), ValueError, r"TrainConfig: init_std must be a finite number > 0.0; got 0.0"),
        (dict(retraction=1), TypeError, r"TrainConfig: retraction must be True or False; got int 1"),
        (dict(max_rounds=-1), ValueError, r"TrainConfig: max_rounds must be an int >= 0; got -1"),
        (dict(max_step=0.0), ValueError, r"TrainConfig: max_step must be a finite number > 0.0 or None; got 0.0"),
        (dict(lr_schedule="cosine"), ValueError, r"TrainConfig: lr_schedule must be one of 'constant', 'linear'; got 'cosine'"),
        (dict(optimizer="adam"), ValueError, r"TrainConfig: optimizer must be one of 'sgd', 'rmsprop'; got 'adam'"),
        (dict(rmsprop_eps=0.0), ValueError, r"TrainConfig: rmsprop_eps must be a finite number > 0.0; got 0.0"),
        (dict(lr_end_mult=0.0), ValueError, r"TrainConfig: lr_end_mult must be a finite number > 0.0; got 0.0"),
        (dict(checkpoint_every=0), ValueError, r"TrainConfig: checkpoint_every must be an int >= 1 or None; got 0"),
        (dict(device=0), TypeError, r"TrainConfig: device must be a str, a torch.device or 'auto'; got int"),
        (dict(device="gpu"), ValueError, r"TrainConfig: device must be 'cpu', 'cuda', 'cuda:N' or 'auto'; got 'gpu'"),
        (dict(device="meta"), ValueError, r"TrainConfig: device must be .*; got 'meta'"),
        (dict(fast="yes"), TypeError, r"TrainConfig: fast must be True or False; got str 'yes'"),
        (dict(fast=True, retraction=False), ValueError, r"TrainConfig: fast=True needs retraction=True"),
    ],
)
def test_validation_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        TrainConfig(**kwargs)


def test_frozen_and_replace_checks_again():
    cfg = TrainConfig(epochs=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0
    assert dataclasses.replace(cfg, lr=2).lr == 2.0
    with pytest.raises(ValueError, match=r"TrainConfig: batch_size must be an int >= 1; got 0"):
        dataclasses.replace(cfg, batch_size=0)


@pytest.mark.parametrize(
    "cfg",
    [
        TrainConfig(),
        TrainConfig(nc=None, dtype=torch.float32, max_step=None, lr_schedule="constant", device="auto"),
        TrainConfig(nc=3, dtype=torch.bfloat16, checkpoint_every=7, fast=True, device="cuda:1", seed=-3),
        TrainConfig(dtype=torch.float16, retraction=False, max_rounds=0, epochs=0),
    ],
)
def test_to_dict_from_dict_round_trip_through_json(cfg):
    d = cfg.to_dict()
    assert list(d) == [f.name for f in dataclasses.fields(TrainConfig)]
    assert d["dtype"] == str(cfg.dtype).removeprefix("torch.")
    again = TrainConfig.from_dict(json.loads(json.dumps(d)))
    assert again == cfg and again.dtype is cfg.dtype


def test_from_dict_errors_and_older_records():
    with pytest.raises(TypeError, match=r"TrainConfig.from_dict: data must be a dict .*; got list"):
        TrainConfig.from_dict([("lr", 1.0)])
    with pytest.raises(ValueError, match=r"TrainConfig.from_dict: unknown keys \['lrr'\]; expected TrainConfig fields"):
        TrainConfig.from_dict({"lrr": 1.0})
    with pytest.raises(ValueError, match=r"TrainConfig.from_dict: dtype must be one of .*'float64'.*; got 'float65'"):
        TrainConfig.from_dict({"dtype": "float65"})
    with pytest.raises(ValueError, match=r"TrainConfig: lr must be a finite number > 0.0; got -1.0"):
        TrainConfig.from_dict({"lr": -1.0})
    # a record written before TrainConfig: no device / checkpoint_every, but device_type
    old = {
        "manifold": "halfspace",
        "curvature": -1.0,
        **TrainConfig(epochs=9).to_dict(),
        "graph_checksum": "0" * 64,
        "num_nodes": 3,
        "num_edges": 2,
        "device_type": "cuda",
        "init": None,
    }
    del old["device"], old["checkpoint_every"]
    assert set(old) - set(TrainConfig().to_dict()) == set(RECORD_KEYS)
    cfg = TrainConfig.from_dict(old)
    assert cfg == TrainConfig(epochs=9, device="cuda")


def test_describe_names_every_field():
    cfg = TrainConfig(nc=None, dtype=torch.float32, epochs=12, checkpoint_every=3)
    text = cfg.describe()
    assert str(cfg) == text and text.splitlines()[0] == "TrainConfig"
    for name, value in cfg.to_dict().items():
        assert text.count(f" {name}=") == 1 and f"{name}={value}" in text
    assert "dtype=float32" in text and "nc=None" in text
    assert not any(line.startswith("{") for line in text.splitlines())  # the CLI's JSON line stays the only one


def test_doctests():
    assert doctest.testmod(config_module, optionflags=doctest.ELLIPSIS).failed == 0


def test_exported_from_the_package_without_importing_the_pipeline():
    assert hypermc.TrainConfig is TrainConfig and "TrainConfig" in hypermc.__all__
    code = "import sys, hypermc; assert 'hypermc.embed' not in sys.modules; print(hypermc.TrainConfig.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "hypermc.embed.config"


def test_epoch_lr_reads_a_config_like_its_record():
    cfg = TrainConfig(epochs=50, burnin=5)
    assert [epoch_lr(cfg, e) for e in range(50)] == [epoch_lr(cfg.to_dict(), e) for e in range(50)]


def test_train_with_config_equals_train_with_keywords(tmp_path):
    g = tree_closure(2, 2)
    M = PoincareHalfspace()
    a = train(g, M, **TINY, progress=False)
    cfg = TrainConfig(**TINY)
    b = train(g, M, cfg, progress=False)
    c = train(g, M, config=cfg, progress=False)
    for r in (b, c):
        assert torch.equal(r.embeddings.components, a.embeddings.components)
        assert [h["loss"] for h in r.history] == [h["loss"] for h in a.history]
        assert r.config == a.config
    assert TrainConfig.from_dict(a.config) == cfg


def test_near_negatives_change_the_run_after_burn_in_only():
    """``near_negatives`` draws from the sampler's near slots after burn-in: the burn-in
    epochs are those of the plain run, the later ones differ; a run is reproducible."""
    g = tree_closure(3, 3)
    M = PoincareHalfspace()
    kw = dict(TINY, epochs=3, burnin=1, negatives=6)
    plain = train(g, M, **kw, progress=False)
    near = train(g, M, **kw, near_negatives=3, progress=False)
    again = train(g, M, **kw, near_negatives=3, progress=False)
    assert near.history[0]["loss"] == plain.history[0]["loss"]
    assert near.history[-1]["loss"] != plain.history[-1]["loss"]
    assert torch.equal(near.embeddings.components, again.embeddings.components)
    assert near.config["near_negatives"] == 3


def test_train_refuses_config_with_keywords_and_unknown_keywords():
    g = tree_closure(1, 2)
    M = PoincareHalfspace()
    with pytest.raises(TypeError, match=r"train: got config and the hyperparameter keywords \['lr'\]; pass one of them"):
        train(g, M, TrainConfig(epochs=1), lr=3.0)
    with pytest.raises(TypeError, match=r"train: unexpected keyword arguments \['lrr'\]; the hyperparameters are"):
        train(g, M, epochs=1, lrr=3.0)
    with pytest.raises(TypeError, match=r"train: config must be a TrainConfig or None; got dict"):
        train(g, M, {"epochs": 1})
    with pytest.raises(TypeError, match=r"train: callback must be callable; got int"):
        train(g, M, epochs=1, callback=3, progress=False)


@pytest.mark.parametrize("nc", [2, None])
def test_checkpoint_holds_the_config(tmp_path, nc):
    g = tree_closure(2, 2)
    M = PoincareHalfspace()
    cfg = TrainConfig(**{**TINY, "nc": nc, "checkpoint_every": 2})
    r = train(g, M, cfg, checkpoint_dir=tmp_path, progress=False)
    ckpt = load_checkpoint(tmp_path / CHECKPOINT_NAME)  # plain runs too (their components are (N, n, 1))
    assert ckpt["config"] == r.config
    assert {k: ckpt["config"][k] for k in cfg.to_dict()} == cfg.to_dict()
    assert TrainConfig.from_dict(ckpt["config"]) == cfg
    again = train(g, M, cfg, resume=tmp_path / CHECKPOINT_NAME, checkpoint_dir=tmp_path / "again", progress=False)
    assert again.epoch == 3 and torch.equal(components_of(again.embeddings), components_of(r.embeddings))  # nothing was left to run


def test_checkpoint_from_before_trainconfig_resumes(tmp_path):
    """A checkpoint whose record lacks ``device`` and ``checkpoint_every`` still resumes bit-identically."""
    g = tree_closure(2, 2)
    M = PoincareHalfspace()
    full = train(g, M, **TINY, progress=False)

    def stop(epoch, stats, embeddings):
        if epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(g, M, **TINY, checkpoint_dir=tmp_path, checkpoint_every=1, callback=stop, progress=False)
    path = tmp_path / CHECKPOINT_NAME
    raw = torch.load(path, weights_only=True)
    del raw["config"]["device"], raw["config"]["checkpoint_every"]
    raw["sha256"] = _content_hash(raw)
    torch.save(raw, path)
    assert TrainConfig.from_dict(load_checkpoint(path)["config"]) == TrainConfig(**TINY)
    resumed = train(g, M, TrainConfig(**TINY), resume=path, progress=False)
    assert torch.equal(resumed.embeddings.components, full.embeddings.components)
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]


def test_cli_prints_the_config(tmp_path, capsys):
    csv = tmp_path / "toy.csv"
    tree_closure(1, 2).to_csv(csv)
    args = [
        "train",
        "--data",
        str(csv),
        "--epochs",
        "2",
        "--nc",
        "plain",
        "--dtype",
        "float32",
        "--lr",
        "3",
        "--checkpoint-every",
        "1",
        "--max-step",
        "0",
    ]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    want = TrainConfig(nc=None, dtype=torch.float32, epochs=2, lr=3.0, checkpoint_every=1, max_step=None)
    assert out.startswith(want.describe() + "\n")
    assert json.loads(out.strip().splitlines()[-1])["lr"] == 3.0  # the JSON line stays last
    assert TrainConfig.from_dict(load_checkpoint(tmp_path / "a" / CHECKPOINT_NAME)["config"]) == want
    assert main([*args, "--out", str(tmp_path / "b"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "TrainConfig" not in out and len(out.strip().splitlines()) == 1


# --- the rule: hyperparameters from the data when they are not given --------------------


@pytest.mark.parametrize("dim", [1, 2, 3, 5, 10, 50])
def test_rule_scales_with_the_dimension_and_switches_schedule_above_the_plane(dim):
    rule = config_module.rule_hyperparameters(dim)
    assert set(rule) == set(config_module.RULE_KEYS)
    assert rule["scale"] == dim / 4
    if dim <= 2:
        assert (rule["epochs"], rule["lr"], rule["burnin"], rule["lr_end_mult"], rule["fast"]) == (1000, 10.0, 20, 8.0, False)
    else:
        assert (rule["epochs"], rule["lr"], rule["burnin"], rule["lr_end_mult"], rule["fast"]) == (200, 5.0, 5, 10.0, True)


def test_auto_config_given_fields_win_and_the_plane_rule_is_the_dataclass_default():
    assert config_module.auto_config(dim=2) == TrainConfig(dim=2)
    cfg = config_module.auto_config(dim=10, scale=3.0, epochs=7, fast=False)
    assert (cfg.scale, cfg.epochs, cfg.fast, cfg.lr, cfg.burnin) == (3.0, 7, False, 5.0, 5)
    # the fast update is a retraction: an explicit retraction=False keeps fast off, not an error
    assert config_module.auto_config(dim=10, retraction=False).fast is False
    with pytest.raises(ValueError, match="TrainConfig: dim must be an int >= 1; got 0"):
        config_module.auto_config(dim=0)


def test_keyword_train_follows_the_rule_and_a_config_is_taken_as_it_is():
    g = tree_closure(2, 2)
    r = train(g, PoincareHalfspace(), dim=3, epochs=1, progress=False)
    assert TrainConfig.from_dict(r.config) == config_module.auto_config(dim=3, epochs=1)
    assert (r.config["scale"], r.config["lr"], r.config["fast"]) == (0.75, 5.0, True)
    given = TrainConfig(dim=3, epochs=1)
    assert TrainConfig.from_dict(train(g, PoincareHalfspace(), given, progress=False).config) == given


def test_cli_flags_not_given_follow_the_rule(tmp_path):
    from hypermc.__main__ import _parser, _train_config

    base = ["train", "--out", str(tmp_path), "--dim", "10"]
    assert _train_config(_parser().parse_args(base)) == config_module.auto_config(dim=10)
    cfg = _train_config(_parser().parse_args([*base, "--scale", "3", "--no-fast", "--epochs", "9", "--lr", "2", "--burnin", "0"]))
    assert (cfg.scale, cfg.fast, cfg.epochs, cfg.lr, cfg.burnin, cfg.lr_end_mult) == (3.0, False, 9, 2.0, 0, 10.0)
    assert _train_config(_parser().parse_args(["train", "--out", str(tmp_path)])) == TrainConfig()


def test_a_parallel_run_gets_the_exact_update_unless_it_asks():
    from hypermc.embed.train import _config_of

    class Parallel:  # stands for a DataParallel; _config_of reads only whether one is given
        pass

    assert _config_of(None, {"dim": 10}).fast is True
    assert _config_of(None, {"dim": 10}, Parallel()).fast is False
    assert _config_of(None, {"dim": 10, "fast": True}, Parallel()).fast is True  # then train refuses it, naming fast


def _star(leaves: int):
    """A closure with ``leaves`` edges (a root and its leaves)."""
    from hypermc.data import Graph

    return Graph.from_pairs([(f"n{i}", "root") for i in range(leaves)])


def test_the_rule_picks_the_nouns_recipe_for_large_graphs_in_space():
    from hypermc.embed.config import LARGE_GRAPH_EDGES, RULE_KEYS, auto_config, rule_hyperparameters
    from hypermc.embed.train import _config_of

    small, big = rule_hyperparameters(10, edges=LARGE_GRAPH_EDGES - 1), rule_hyperparameters(10, edges=LARGE_GRAPH_EDGES)
    assert set(small) == set(big) == set(RULE_KEYS)
    assert (small["optimizer"], small["batch_size"], small["lr"], small["scale"]) == ("sgd", 512, 5.0, 2.5)
    keys = ("optimizer", "lr", "lr_schedule", "batch_size", "scale", "burnin", "epochs", "fast")
    assert tuple(big[k] for k in keys) == ("rmsprop", 0.02, "constant", 32768, 4.0, 10, 160, True)
    assert rule_hyperparameters(2, edges=10**6) == rule_hyperparameters(2)  # 2-D keeps its rule
    assert rule_hyperparameters(10) == small  # no size: a small graph
    # train() reads the graph's size; given keywords win; SGD keeps the small rule
    graph = _star(LARGE_GRAPH_EDGES)
    cfg = _config_of(None, {"dim": 10, "nc": 2}, None, graph)
    assert cfg == auto_config(edges=graph.num_edges, dim=10, nc=2) and cfg.optimizer == "rmsprop" and cfg.batch_size == 32768
    assert _config_of(None, {"dim": 10, "lr": 0.01}, None, graph).lr == 0.01
    sgd = _config_of(None, {"dim": 10, "optimizer": "sgd"}, None, graph)
    assert (sgd.lr, sgd.batch_size, sgd.scale) == (5.0, 512, 2.5)
    with pytest.raises(ValueError, match=r"rule_hyperparameters: edges must be"):
        rule_hyperparameters(10, edges=-1)


def test_the_cli_rule_reads_the_graph_size(tmp_path):
    """``python -m hypermc train`` without --optimizer / --batch-size / --lr-schedule follows
    the rule for the loaded graph (the printed config is the one trained)."""
    from hypermc.__main__ import _parser, _train_config
    from hypermc.embed.config import LARGE_GRAPH_EDGES

    args = _parser().parse_args(["train", "--data", "mammals", "--dim", "10", "--out", str(tmp_path / "r")])
    assert _train_config(args).optimizer == "sgd"
    big = _train_config(args, LARGE_GRAPH_EDGES)
    assert (big.optimizer, big.batch_size, big.lr_schedule, big.lr) == ("rmsprop", 32768, "constant", 0.02)
    args = _parser().parse_args(["train", "--data", "mammals", "--dim", "10", "--optimizer", "sgd", "--out", str(tmp_path / "r")])
    assert _train_config(args, LARGE_GRAPH_EDGES).batch_size == 512
