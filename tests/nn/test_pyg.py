"""PyTorch Geometric layers on MC features: GCNConv, SAGEConv, GATConv and GINConv agree
with the same layer in float64 (forward and gradients), and on cancelling data the MC
result is exact or far more accurate than float64 against Fraction / mpmath references."""

from __future__ import annotations

import copy
import runpy
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.nn import to_mc
from tests.oracle import components_to_fraction

# torch_geometric's import scripts functions with torch.jit (deprecated in torch 2.13)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
    pyg_nn = pytest.importorskip("torch_geometric.nn")

f64 = torch.float64
N, F_IN, F_OUT = 9, 4, 5

LAYERS = {
    "gcn": lambda: pyg_nn.GCNConv(F_IN, F_OUT),
    "sage-mean": lambda: pyg_nn.SAGEConv(F_IN, F_OUT),
    "sage-max": lambda: pyg_nn.SAGEConv(F_IN, F_OUT, aggr="max"),
    "gat": lambda: pyg_nn.GATConv(F_IN, F_OUT, heads=2),
    "gin": lambda: pyg_nn.GINConv(
        torch.nn.Sequential(torch.nn.Linear(F_IN, 6), torch.nn.ReLU(), torch.nn.Linear(6, F_OUT)), train_eps=True
    ),
}


def _graph(rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Features (N, F_IN) and a random directed edge list (2, E) without self loops."""
    src = torch.randint(0, N, (30,), generator=rng)
    dst = torch.randint(0, N, (30,), generator=rng)
    keep = src != dst
    return torch.randn(N, F_IN, generator=rng, dtype=f64), torch.stack([src[keep], dst[keep]])


def _layer(name: str, rng: torch.Generator) -> torch.nn.Module:
    layer = LAYERS[name]().double()
    with torch.no_grad():  # seeded, nonzero values everywhere (biases and eps included)
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=rng, dtype=f64) * 0.5)
    return layer


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    assert isinstance(got, hm.MCTensor) and got.dtype == f64
    torch.testing.assert_close(got.detach().approx(), want.detach(), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("mc_params", [False, True], ids=["float64-params", "mc-params"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_on_mc_features_matches_float64(name, mc_params, rng):
    x64, edges = _graph(rng)
    layer64 = _layer(name, rng)
    w = torch.randn(N, layer64(x64, edges).shape[1], generator=rng, dtype=f64)
    x_ref = x64.clone().requires_grad_()
    out64 = layer64(x_ref, edges)
    (out64 * w).sum().backward()

    layer = copy.deepcopy(layer64)
    layer.zero_grad()
    if mc_params:
        to_mc(layer, nc=2)
    else:  # MC features only (an MC gradient of a plain parameter follows hypermc's mixed rule, tested elsewhere)
        layer.requires_grad_(False)
    x = hm.mc(x64, nc=2).requires_grad_()
    out = layer(x, edges)
    (out * w).sum().backward()
    _close(out, out64)
    _close(x.grad, x_ref.grad)
    for (pname, p), p64 in zip(layer.named_parameters(), layer64.parameters()):
        if mc_params:
            assert isinstance(p.grad, hm.MCTensor), pname
            torch.testing.assert_close(p.grad.approx(), p64.grad, rtol=1e-12, atol=1e-13, msg=pname)
        else:
            assert p.grad is None, pname


def test_gat_attention_dropout_draws_the_float64_masks(rng):
    """GATConv's attention dropout (training mode): with the same seed the MC layer drops
    the same attention weights as the float64 layer (``bernoulli_`` on an MCTensor draws
    what a plain tensor draws), so the outputs and gradients agree."""
    x64, edges = _graph(rng)
    layer64 = pyg_nn.GATConv(F_IN, F_OUT, heads=2, dropout=0.5).double()
    layer = to_mc(copy.deepcopy(layer64), nc=2)
    x_ref = x64.clone().requires_grad_()
    torch.manual_seed(1)
    out64 = layer64(x_ref, edges)
    out64.sum().backward()
    x = hm.mc(x64, nc=2).requires_grad_()
    torch.manual_seed(1)
    out = layer(x, edges)
    out.sum().backward()
    _close(out, out64)
    _close(x.grad, x_ref.grad)
    mask = hm.mc(torch.zeros(1000, dtype=f64), nc=2).bernoulli_(0.3, generator=torch.Generator().manual_seed(0))
    plain = torch.zeros(1000, dtype=f64).bernoulli_(0.3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(mask.components, torch.stack([plain, torch.zeros_like(plain)], -1))


UTILS = ("softmax-ptr", "softmax-index", "segment-sum", "segment-mean", "segment-max", "scatter-mul", "scatter-min", "scatter-mean")


@pytest.mark.parametrize("name", UTILS)
def test_pyg_utils_match_float64(name, rng):
    """torch_geometric.utils' softmax (by index and by CSR pointer: segment reductions and
    repeat_interleave), segment and scatter on MC values, forward and backward."""
    from torch_geometric.utils import scatter, segment, softmax

    ptr, index = torch.tensor([0, 3, 3, 7]), torch.tensor([0, 0, 0, 2, 2, 2, 2])
    fn = {
        "softmax-ptr": lambda t: softmax(t, ptr=ptr),
        "softmax-index": lambda t: softmax(t, index),
        "segment-sum": lambda t: segment(t, ptr, "sum"),
        "segment-mean": lambda t: segment(t, ptr, "mean"),
        "segment-max": lambda t: segment(t, ptr, "max"),
        "scatter-mul": lambda t: scatter(t, index, reduce="mul"),
        "scatter-min": lambda t: scatter(t, index, reduce="min"),
        "scatter-mean": lambda t: scatter(t, index, reduce="mean"),
    }[name]
    x64 = torch.randn(7, 2, generator=rng, dtype=f64).requires_grad_()
    want = fn(x64)
    w = torch.randn(want.shape, generator=rng, dtype=f64)
    (want * w).sum().backward()
    x = hm.mc(x64.detach(), nc=2).requires_grad_()
    got = fn(x)
    (got * w).sum().backward()
    _close(got, want)
    _close(x.grad, x64.grad)


# ------------------------------------------------------------ ill-conditioned aggregation

# node 3 receives 1e20, 1 and -1e20 (and 2^-60 from node 4): float64 loses the 1
BIG = [[1e20], [1.0], [-1e20], [0.5], [2.0**-60]]
CANCEL_EDGES = torch.tensor([[0, 1, 2, 4], [3, 3, 3, 3]])


def _identity_weights(layer: torch.nn.Module) -> torch.nn.Module:
    """1x1 weights set to 1, biases and the other weights to 0 (so the layer is a plain
    aggregation whose exact value is known)."""
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.fill_(1.0 if name.endswith("weight") and "lin_r" not in name else 0.0)
    return layer


CANCELLING = {  # layer, exact output of node 3 given the features BIG
    "gcn": (lambda: pyg_nn.GCNConv(1, 1, normalize=False, add_self_loops=False), Fraction(1) + Fraction(2) ** -60),
    "sage-sum": (lambda: pyg_nn.SAGEConv(1, 1, aggr="sum", root_weight=False), Fraction(1) + Fraction(2) ** -60),
    "sage-mean": (lambda: pyg_nn.SAGEConv(1, 1, aggr="mean", root_weight=False), (Fraction(1) + Fraction(2) ** -60) / 4),
    "gin": (lambda: pyg_nn.GINConv(torch.nn.Identity()), Fraction(1) + Fraction(2) ** -60 + Fraction(1, 2)),
}


@pytest.mark.parametrize("name", sorted(CANCELLING))
def test_cancelling_aggregation_is_exact_in_mc(name):
    make, exact = CANCELLING[name]
    layer = _identity_weights(make().double())
    x64 = torch.tensor(BIG, dtype=f64)
    plain = layer(x64, CANCEL_EDGES)[3, 0].item()
    got = layer(hm.mc(x64, nc=2), CANCEL_EDGES)
    assert components_to_fraction(got.components)[3, 0] == exact
    assert abs(Fraction(plain) - exact) > Fraction(1, 8)  # float64 loses the 1 (or all of it)


def _gat_reference(x: list[Fraction], edges: torch.Tensor, a_src: Fraction, a_dst: Fraction) -> list[mpmath.mpf]:
    """GATConv with one channel, one head, weight 1, bias 0, self loops, PyG's softmax
    (``exp(e - max) / (sum + 1e-16)``), in mpmath."""
    h = [mpmath.mpf(v.numerator) / v.denominator for v in x]
    src = edges[0].tolist() + list(range(len(x)))
    dst = edges[1].tolist() + list(range(len(x)))
    out = []
    for i in range(len(x)):
        js = [j for j, t in zip(src, dst) if t == i]
        e = [a_src * h[j] + a_dst * h[i] for j in js]
        e = [v if v > 0 else mpmath.mpf(0.2) * v for v in e]
        m = max(e)
        ex = [mpmath.exp(v - m) for v in e]
        total = mpmath.fsum(ex) + mpmath.mpf(1e-16)
        out.append(mpmath.fsum(ex[k] / total * h[j] for k, j in enumerate(js)))
    return out


def test_gat_attention_on_cancelling_features_against_mpmath():
    layer = pyg_nn.GATConv(1, 1, heads=1).double()
    a_src, a_dst = 2.0**-70, -(2.0**-72)  # attention scores distinct, far below the features' scale
    with torch.no_grad():
        layer.lin.weight.fill_(1.0)
        layer.att_src.fill_(a_src)
        layer.att_dst.fill_(a_dst)
        layer.bias.zero_()
    x64 = torch.tensor(BIG, dtype=f64)
    plain = layer(x64, CANCEL_EDGES)[:, 0]
    got = layer(hm.mc(x64, nc=2), CANCEL_EDGES)
    with mpmath.workprec(400):
        want = _gat_reference([Fraction(v[0]) for v in BIG], CANCEL_EDGES, Fraction(a_src), Fraction(a_dst))
        exact = components_to_fraction(got.components)[:, 0]
        err_mc = max(abs(mpmath.mpf(g.numerator) / g.denominator - w) for g, w in zip(exact, want))
        err_64 = max(abs(mpmath.mpf(p) - w) for p, w in zip(plain.tolist(), want))
    # node 3's output is about 0.3; its terms are 1e20 / 5: float64 errs by about 0.3,
    # MC by at most about 2 u^2 * 1e20 (sum bound over |terms|)
    assert err_64 > 0.05
    assert err_mc < 1e20 * 2.0**-100


def test_float32_weights_on_float64_mc_features_explain_the_fix(rng):
    x64, edges = _graph(rng)
    layer = pyg_nn.GCNConv(F_IN, F_OUT)  # float32 parameters
    with pytest.raises(TypeError, match=r"float64 with a plain tensor of dtype torch\.float32.*model\.double\(\) for float64 MC inputs"):
        layer(hm.mc(x64, nc=2), edges)
    with pytest.raises(TypeError, match=r"^to_mc: module must be a torch\.nn\.Module; got Tensor$"):
        to_mc(x64)
    with pytest.raises(ValueError, match=r"^to_mc: nc must be an int >= 1; got 0$"):
        to_mc(layer, nc=0)
    to_mc(layer, nc=2, dtype=f64)  # or layer.double(): the same values, exactly
    assert layer(hm.mc(x64, nc=2), edges).dtype == f64


def test_to_mc_shares_tied_parameters_and_keeps_values(rng):
    lin = torch.nn.Linear(3, 3).double()
    model = torch.nn.Sequential(lin, torch.nn.ReLU(), lin)
    values = [p.detach().clone() for p in lin.parameters()]
    to_mc(model, nc=3)
    assert model[0].weight is model[2].weight and model[0].weight.nc == 3
    assert all(torch.equal(p.approx(), v) for p, v in zip(lin.parameters(), values))


def test_link_prediction_example_rows_agree(capsys):
    """examples/pyg_link_prediction.py, cut to two epochs: the float64 and MC rows of each
    convolution reach the same metrics (the example's table layout is what docs/gnn.md shows)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "pyg_link_prediction.py"
    old_path = list(sys.path)
    sys.path[:0] = [str(path.parent)]
    try:
        runpy.run_path(str(path), run_name="example")["main"](["--quick", "--epochs", "2", "--dim", "4"])
    finally:
        sys.path[:] = old_path
        sys.modules.pop("hgcn_link_prediction", None)
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| G")]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        ("GCN", "fp64"),
        ("GCN", "MC fp64 nc=2"),
        ("GAT", "fp64"),
        ("GAT", "MC fp64 nc=2"),
    ]
    for plain, mc in (rows[:2], rows[2:]):
        assert plain[2:7] == mc[2:7]  # val / test ROC-AUC and AP, best epoch
        assert abs(float(plain[7]) - float(mc[7])) < 1e-9  # last loss
