"""Tests of the hyperbolic graph layers (hypermc.nn.hyperbolic), the link-prediction
example's training function and metrics, and the "Hyperbolic GNN layers" snippet of docs/gnn.md."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.manifolds import Euclidean, Lorentz, PoincareBall, convert
from hypermc.nn import HypAct, HypAgg, HypGraphConv, HypLinear
from hypermc.nn import hyperbolic as H
from tests.manifolds import points as P

f32, f64 = torch.float32, torch.float64
ROOT = pathlib.Path(__file__).resolve().parents[2]

MANIFOLDS = [PoincareBall(), Lorentz(), PoincareBall(curvature=-2.0), Lorentz(curvature=-0.5)]
IDS = [repr(m) for m in MANIFOLDS]


def _plain(t: torch.Tensor) -> torch.Tensor:
    return t.detach().approx() if isinstance(t, hm.MCTensor) else t.detach()


def _finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t.components if isinstance(t, hm.MCTensor) else t).all())


def _max_abs(t: torch.Tensor) -> float:
    return float(_plain(t).abs().max())


def _points(M, n, dim, nc, dtype, seed, std=1.0):
    return M.random(n, dim, std=std, nc=nc, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _adj(n, seed, dtype=f64):
    g = torch.Generator().manual_seed(seed)
    a = (torch.rand(n, n, generator=g) < 0.4).to(dtype)
    return ((a + a.T + torch.eye(n, dtype=dtype)) > 0).to(dtype)


def _set_params(layer, seed):
    """Non-zero bias (the default is 0) so the bias path is exercised."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)


# ---------------------------------------------------------------- membership


@pytest.mark.parametrize("M", MANIFOLDS, ids=IDS)
@pytest.mark.parametrize("nc", [None, 2])
@pytest.mark.parametrize("sparse", [False, True])
def test_layers_preserve_membership(M, nc, sparse, seed):
    x = _points(M, 7, 5, nc, f64, seed)
    torch.manual_seed(seed)
    lin = HypLinear(M, 5, 4, nc=nc, dtype=f64)
    _set_params(lin, seed)
    adj = _adj(7, seed)
    adj = adj.to_sparse() if sparse else adj
    h = lin(x)
    assert M.check_point(h) == (True, None)
    for aggr in ("mean", "sum"):
        assert M.check_point(HypAgg(M, aggr)(h, adj)) == (True, None)
    out = HypAct(M, torch.tanh)(HypAgg(M)(h, adj))
    assert M.check_point(out) == (True, None)
    # MC points or MC parameters give MC points (checked in MC by check_point); the dtype reaches them
    assert isinstance(out, hm.MCTensor) == (nc is not None)
    assert out.dtype == f64 and lin.weight.dtype == f64
    if nc is not None:
        assert out.nc == nc and lin.weight.nc == nc


@pytest.mark.parametrize("M", [PoincareBall(), Lorentz()], ids=["ball", "lorentz"])
def test_plain_points_mc_parameters_give_mc(M, seed):
    x = _points(M, 4, 3, None, f32, seed)
    torch.manual_seed(seed)
    conv = HypGraphConv(M, 3, 3, nc=2, dtype=f32)
    out = conv(x, torch.eye(4, dtype=f32))
    assert isinstance(out, hm.MCTensor) and out.nc == 2 and out.dtype == f32
    assert M.check_point(out) == (True, None)


def test_hyp_act_to_another_curvature(seed):
    Mi, Mo = Lorentz(curvature=-1.0), Lorentz(curvature=-3.0)
    x = _points(Mi, 5, 4, 2, f64, seed)
    y = HypAct(Mi, torch.relu, Mo)(x)
    assert Mo.check_point(y) == (True, None)
    assert Mi.check_point(y)[0] is False  # a point of the other hyperboloid


def test_sparse_and_dense_aggregation_agree(seed):
    M = PoincareBall()
    adj = _adj(9, seed)
    for nc in (None, 2):
        x = _points(M, 9, 3, nc, f64, seed)
        for aggr in ("mean", "sum"):
            d = H.hyp_agg(M, x, adj, aggr)
            s = H.hyp_agg(M, x, adj.to_sparse(), aggr)
            assert _max_abs(d - s) < (1e-15 if nc is None else 1e-28)  # measured 6e-17, 1e-32


def test_mean_aggregation_is_the_mean_in_the_tangent_space(seed):
    M = Lorentz()
    x = _points(M, 6, 4, 2, f64, seed)
    adj = _adj(6, seed)
    got = M.logmap0(H.hyp_agg(M, x, adj, "mean"))
    u = M.logmap0(x)
    deg = adj.sum(1, keepdim=True)
    ref = torch.matmul(adj, u) / deg
    assert _max_abs(got - ref) < 1e-28


# ----------------------------------------------------------------- the maths


def test_ball_generic_operations_equal_the_gyrovector_ones(seed):
    M = PoincareBall(curvature=-1.5)
    x, y = _points(M, 6, 4, 2, f64, seed), _points(M, 6, 4, 2, f64, seed + 1, std=2.0)
    w = torch.randn(3, 4, dtype=f64, generator=torch.Generator().manual_seed(seed))
    assert _max_abs(H.mobius_add(M, x, y) - M.mobius_add(x, y)) < 1e-28
    assert _max_abs(H.mobius_matvec(M, w, x) - M.mobius_matvec(w, x)) < 1e-28
    b = torch.randn(3, dtype=f64, generator=torch.Generator().manual_seed(seed + 2))
    h = M.mobius_matvec(w, x)
    ref = M.mobius_add(h, M.expmap0(hm.mc(b, nc=2).expand(6, 3)))
    assert _max_abs(H.hyp_linear(M, x, w, b) - ref) < 1e-28


def test_mobius_add_laws(seed):
    for M in (PoincareBall(), Lorentz()):
        x, y = _points(M, 5, 4, 2, f64, seed), _points(M, 5, 4, 2, f64, seed + 1)
        o = H.origin_like(M, x).expand_as(x)  # Lorentz.expmap does not broadcast x against u
        assert _max_abs(H.mobius_add(M, o, y) - y) < 1e-28
        assert _max_abs(H.mobius_add(M, x, o) - x) < 1e-28


@pytest.mark.parametrize("nc", [None, 2])
def test_graph_conv_agrees_across_models(nc, seed):
    """The same layer on the ball and on the hyperboloid gives corresponding points
    (through convert), with the Lorentz weights acting on the spatial coordinates."""
    B, L = PoincareBall(), Lorentz()
    x = _points(B, 6, 3, nc, f64, seed)
    adj = _adj(6, seed)
    torch.manual_seed(seed)
    cb = HypGraphConv(B, 3, 2, torch.relu, nc=nc, dtype=f64)
    _set_params(cb, seed)
    cl = HypGraphConv(L, 4, 3, torch.relu, nc=nc, dtype=f64)
    with torch.no_grad():
        cl.linear.weight.zero_()
        cl.linear.weight[1:, 1:] = cb.linear.weight
        cl.linear.bias.zero_()
        # Riemannian coordinates at the origin: ball u <-> Lorentz (0, 2u)
        cl.linear.bias[1:] = 2 * cb.linear.bias
    yb = cb(x, adj)
    yl = cl(convert.ball_to_lorentz(x), adj)
    tol = 1e-12 if nc is None else 1e-28
    assert _max_abs(convert.lorentz_to_ball(yl) - yb) < tol


def test_euclidean_reduces_to_a_gcn(seed):
    M = Euclidean()
    x = torch.randn(5, 3, dtype=f64, generator=torch.Generator().manual_seed(seed))
    adj = _adj(5, seed)
    torch.manual_seed(seed)
    conv = HypGraphConv(M, 3, 2, torch.relu, aggr="sum", dtype=f64)
    _set_params(conv, seed)
    ref = torch.relu(adj @ (x @ conv.linear.weight.T + conv.linear.bias))
    assert torch.allclose(conv(x, adj), ref, rtol=1e-14, atol=1e-14)


# ------------------------------------------------------- far from the origin


def _far_ball(nc):
    """Ball points at Euclidean norm 1 - 1e-12 (hyperbolic radius 28.3)."""
    with mpmath.workprec(P.PREC):
        r = 2 * mpmath.atanh(1 - mpmath.mpf("1e-12"))
    return P.to_mc([P.ball_point(r, P.unit(4, s)) for s in range(5)], nc)


def _far_lorentz(nc):
    """Hyperboloid points at hyperbolic radius 22 (time coordinate ~1.8e9)."""
    return P.to_mc([P.lorentz_point(22, P.unit(3, s)) for s in range(5)], nc)


@pytest.mark.parametrize("model", ["ball", "lorentz"])
def test_gradients_finite_far_from_the_origin(model, seed):
    M = PoincareBall() if model == "ball" else Lorentz()
    x = _far_ball(2) if model == "ball" else _far_lorentz(2)
    assert M.check_point(x) == (True, None)
    assert float(_plain(M.dist0(x)).min()) > 21.9
    x.requires_grad_(True)
    torch.manual_seed(seed)
    conv1 = HypGraphConv(M, 4, 4, torch.tanh, nc=2, dtype=f64)
    conv2 = HypGraphConv(M, 4, 4, torch.relu, nc=2, dtype=f64)
    _set_params(conv1, seed)
    adj = _adj(5, seed)
    h = conv2(conv1(x, adj), adj)
    assert M.check_point(h) == (True, None)
    loss = (M.dist(h[:-1], h[1:]) ** 2).sum() + M.dist0(H.hyp_linear(M, x, conv1.linear.weight)).sum()
    loss.backward()
    grads = [x.grad] + [p.grad for p in [*conv1.parameters(), *conv2.parameters()]]
    for g in grads:
        assert isinstance(g, hm.MCTensor) and _finite(g)
    assert _max_abs(x.grad) > 0 and _max_abs(conv1.linear.weight.grad) > 0


# ------------------------------------------------------------------ modules


def test_dropout_only_in_training(seed):
    M = PoincareBall()
    x = _points(M, 4, 6, None, f64, seed)
    torch.manual_seed(seed)
    lin = HypLinear(M, 6, 6, dropout=0.5, dtype=f64)
    lin.eval()
    a, b = lin(x), lin(x)
    assert torch.equal(a, b)
    lin.train()
    torch.manual_seed(seed)
    c = lin(x)
    assert not torch.equal(a, c) and M.check_point(c) == (True, None)


def test_init_is_hgcn_like(seed):
    torch.manual_seed(seed)
    lin = HypLinear(Lorentz(), 9, 5, nc=2, dtype=f64)
    bound = (2**0.5) * (6 / (9 + 5)) ** 0.5
    w = lin.weight.approx()
    assert float(w.abs().max()) <= bound and float(w.abs().max()) > bound / 2
    assert torch.count_nonzero(lin.weight.components[..., 1:]) == 0
    assert torch.count_nonzero(lin.bias.components) == 0
    assert "in_features=9" in repr(lin) and "nc=2" in repr(lin)


# ------------------------------------------------------------------- errors


def test_errors_name_the_argument():
    M = Lorentz()
    with pytest.raises(TypeError, match="manifold must be a hypermc manifold"):
        HypLinear("ball", 3, 3)
    with pytest.raises(ValueError, match=r"in_features must be an int >= 2; got 1 \(the smallest point dimension of Lorentz"):
        HypLinear(M, 1, 3)
    with pytest.raises(TypeError, match="out_features must be an int"):
        HypLinear(M, 3, 3.0)
    with pytest.raises(ValueError, match=r"dropout must be a finite number in \[0.0, 1.0\); got 1.0"):
        HypLinear(M, 3, 3, dropout=1.0)
    with pytest.raises(ValueError, match=r"nc must be an int >= 1 or None \(plain parameters\); got 0"):
        HypLinear(M, 3, 3, nc=0)
    with pytest.raises(ValueError, match="aggr must be one of"):
        HypAgg(M, "max")
    with pytest.raises(TypeError, match="act must be callable"):
        HypAct(M, "relu")
    with pytest.raises(TypeError, match="manifold_out must be"):
        HypAct(M, torch.relu, manifold_out=1.0)


def test_adjacency_errors(seed):
    M = PoincareBall()
    x = _points(M, 4, 3, 2, f64, seed)
    with pytest.raises(ValueError, match=r"adj must have shape \(N, N\) = \(4, 4\)"):
        H.hyp_agg(M, x, torch.eye(3, dtype=f64))
    with pytest.raises(TypeError, match="adj has dtype torch.float32"):
        H.hyp_agg(M, x, torch.eye(4, dtype=f32))
    with pytest.raises(TypeError, match="adj must be a plain"):
        H.hyp_agg(M, x, hm.mc(torch.eye(4, dtype=f64), nc=2))
    with pytest.raises(ValueError, match="x must be a matrix of points"):
        H.hyp_agg(M, x.unsqueeze(0), torch.eye(4, dtype=f64))
    adj = torch.eye(4, dtype=f64)
    adj[2, 2] = 0
    with pytest.raises(ValueError, match="1 rows that sum to 0 \\(first: row 2\\)"):
        H.hyp_agg(M, x, adj.to_sparse(), "mean")
    assert M.check_point(H.hyp_agg(M, x, adj, "sum")) == (True, None)  # sum: row 2 -> origin


def test_point_dimension_mismatch_is_reported(seed):
    M = PoincareBall()
    lin = HypLinear(M, 3, 2, dtype=f64)
    with pytest.raises(ValueError, match=r"x must be points \(\*, 3\) to match weight of shape \(2, 3\)"):
        lin(_points(M, 4, 5, None, f64, seed))


# ------------------------------------------------------------- the example


def _load_example():
    path = ROOT / "examples" / "hgcn_link_prediction.py"
    spec = importlib.util.spec_from_file_location("hgcn_link_prediction", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_metrics_match_their_definitions():
    ex = _load_example()
    # sklearn's documented example: y = [0, 0, 1, 1], scores [0.1, 0.4, 0.35, 0.8]
    pos, neg = torch.tensor([0.35, 0.8]), torch.tensor([0.1, 0.4])
    assert ex.roc_auc(pos, neg) == pytest.approx(0.75)
    assert ex.average_precision(pos, neg) == pytest.approx(0.8333333333333333)
    g = torch.Generator().manual_seed(0)
    pos = torch.randint(0, 6, (30,), generator=g).double()
    neg = torch.randint(0, 6, (40,), generator=g).double()  # many ties
    pairs = (pos[:, None] > neg[None, :]).double() + 0.5 * (pos[:, None] == neg[None, :]).double()
    assert ex.roc_auc(pos, neg) == pytest.approx(float(pairs.mean()))
    assert ex.average_precision(torch.ones(3), torch.zeros(5)) == pytest.approx(1.0)


def test_example_graph_and_split(seed):
    ex = _load_example()
    n, edges = ex.make_graph(2, 3, ancestors=2, noise=0.1, seed=seed)
    assert n == 15 and len(edges) == 14 + 12 + 3
    assert bool((edges[:, 0] < edges[:, 1]).all())
    data = ex.split_edges(n, edges, seed=seed)
    pos = torch.cat([data["train_pos"], data["val_pos"], data["test_pos"]])
    assert sorted(map(tuple, pos.tolist())) == sorted(map(tuple, edges.tolist()))
    neg = torch.cat([data["val_neg"], data["test_neg"], data["train_neg_pool"]])
    assert len(neg) == n * (n - 1) // 2 - len(edges)
    assert not set(map(tuple, neg.tolist())) & set(map(tuple, edges.tolist()))


def test_example_training_smoke(seed):
    ex = _load_example()
    n, edges = ex.make_graph(2, 5, ancestors=3, noise=0.05, seed=seed)  # 63 nodes, 187 edges
    data = ex.split_edges(n, edges, val=0.1, test=0.25, seed=seed)
    r = ex.train_link_prediction(data, manifold="ball", dtype=f64, dim=8, epochs=40, eval_every=5, seed=seed)
    assert r["test_roc"] > 0.7 and r["val_roc"] > 0.7  # measured 0.767, 0.767 (seeds 1-3: 0.75-0.91)
    mc = ex.train_link_prediction(data, manifold="lorentz", dtype=f64, nc=2, dim=8, epochs=3, eval_every=3, seed=seed)
    assert set(mc) >= {"val_roc", "val_ap", "test_roc", "test_ap", "seconds", "loss"}
    assert 0.0 <= mc["test_roc"] <= 1.0 and mc["loss"] == mc["loss"]


# -------------------------------------------------------------- docs snippet


def test_docs_snippet_runs(capsys):
    text = (ROOT / "docs" / "gnn.md").read_text()
    section = text.split("# Hyperbolic GNN layers", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "the docs/gnn.md section has no python block"
    exec(compile(blocks[0], "docs/gnn.md", "exec"), {})
    out = capsys.readouterr().out
    assert "(True, None)" in out and "nan" not in out.lower()
