"""Tests of the MC modules: nn.Linear/nn.Embedding semantics, accuracy against exact
references, gradients, and argument errors."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hypermc as hm
from hypermc.nn import MCGELU, MCEmbedding, MCLinear, MCReLU, MCSequential, MCSoftmax, MCToTensor
from tests.oracle import BOUNDS, UNIT_ROUNDOFF_BITS, assert_within, components_to_fraction

f16, f32, f64 = torch.float16, torch.float32, torch.float64


def _exact_affine(x, w, b=None):
    """Exact ``x @ w.T + b`` (Fractions) and its matmul-bound scale ``|x| @ |w|.T + |b|``.

    Arguments are component tensors (or MCTensors) of any nc.
    """
    xf, wf = components_to_fraction(x), components_to_fraction(w)
    exact, scale = xf @ wf.T, np.abs(xf) @ np.abs(wf).T
    if b is not None:
        bf = components_to_fraction(b)
        exact, scale = exact + bf, scale + np.abs(bf)
    return exact, scale


# ------------------------------------------------------------------------- MCLinear


@pytest.mark.parametrize("dtype", [f16, f32, f64])
@pytest.mark.parametrize("nc", [1, 2, 3])
def test_linear_init_equals_nn_linear(dtype, nc, seed):
    torch.manual_seed(seed)
    layer = MCLinear(5, 3, nc=nc, dtype=dtype)
    torch.manual_seed(seed)
    ref = nn.Linear(5, 3, dtype=dtype)
    assert layer.weight.dtype == dtype and layer.weight.nc == nc
    assert isinstance(layer.weight, nn.Parameter) and isinstance(layer.weight, hm.MCTensor)
    assert torch.equal(layer.weight.approx(), ref.weight.detach())
    assert torch.equal(layer.bias.approx(), ref.bias.detach())
    assert torch.count_nonzero(layer.weight.components[..., 1:]) == 0


@pytest.mark.parametrize("dtype", [f32, f64])
@pytest.mark.parametrize("shape", [(4,), (6, 4), (2, 3, 4)])
def test_linear_nc1_matches_nn_linear(dtype, shape, rng):
    torch.manual_seed(0)
    layer = MCLinear(4, 3, nc=1, dtype=dtype)
    ref = nn.Linear(4, 3, dtype=dtype)
    with torch.no_grad():
        ref.weight.copy_(layer.weight.approx())
        ref.bias.copy_(layer.bias.approx())
    x = torch.randn(shape, generator=rng, dtype=dtype)
    out = layer(x)
    assert isinstance(out, hm.MCTensor) and out.nc == 1 and out.shape == (*shape[:-1], 3)
    # both are the exact result up to one matmul's rounding: k ulps of |x| |W| + |b|
    bound = 4 * torch.finfo(dtype).eps * (x.abs() @ ref.weight.detach().abs().T + ref.bias.detach().abs())
    assert torch.all((out.approx() - ref(x).detach()).abs() <= bound)
    # and ours alone is within the matmul bound of the exact result (measured 1.3 u)
    exact, scale = _exact_affine(x.unsqueeze(-1), layer.weight, layer.bias)
    assert_within(out.components, exact, dtype, 1, "matmul", scale=scale)


@pytest.mark.parametrize("dtype, nc", [(f32, 2), (f64, 2), (f16, 2), (f32, 3)])
def test_linear_forward_accuracy(dtype, nc, rng):
    layer = MCLinear(6, 4, nc=nc, dtype=dtype)
    with torch.no_grad():  # weights with full nc-component values
        layer.weight.copy_(hm.mc(torch.randn(4, 6, generator=rng, dtype=f64), nc=nc, dtype=dtype))
    x = torch.randn(5, 6, generator=rng, dtype=f64).to(dtype)
    out = layer(x)
    assert out.nc == nc and out.dtype == dtype
    exact, scale = _exact_affine(x.unsqueeze(-1), layer.weight, layer.bias)
    assert_within(out.components, exact, dtype, nc, "matmul", scale=scale)


def test_linear_mc_input_and_bias_false(rng):
    layer = MCLinear(3, 2, bias=False, nc=2, dtype=f64)
    assert layer.bias is None and len(list(layer.parameters())) == 1
    x = hm.mc(torch.randn(4, 3, generator=rng, dtype=f64), nc=3)
    out = layer(x)
    assert out.nc == 3 and out.shape == (4, 2)
    exact, scale = _exact_affine(x, layer.weight)
    assert_within(out.components, exact, f64, 3, "matmul", scale=scale)


def test_linear_gradients_are_mc(rng):
    dtype, nc = f32, 2
    layer = MCLinear(3, 2, nc=nc, dtype=dtype)
    x = torch.randn(7, 3, generator=rng, dtype=dtype)
    (layer(x) * layer(x)).sum().backward()
    for p in layer.parameters():
        assert isinstance(p.grad, hm.MCTensor) and p.grad.nc == nc and p.grad.shape == p.shape
    # reference in float64 on the exact parameter values (exact in float64)
    w = layer.weight.detach().to(f64).approx().requires_grad_()
    b = layer.bias.detach().to(f64).approx().requires_grad_()
    y = F.linear(x.to(f64), w, b)
    (y * y).sum().backward()
    rtol = BOUNDS["grad"] * 2.0 ** (-UNIT_ROUNDOFF_BITS[dtype] * nc)  # measured 0.4 u^2
    torch.testing.assert_close(layer.weight.grad.to(f64).approx(), w.grad, rtol=rtol, atol=0)
    torch.testing.assert_close(layer.bias.grad.to(f64).approx(), b.grad, rtol=rtol, atol=0)


def test_linear_repr_and_shape_doc():
    layer = MCLinear(20, 30, nc=2, dtype=f16)
    assert repr(layer) == "MCLinear(in_features=20, out_features=30, bias=True, nc=2, dtype=torch.float16)"
    assert "Shape:" in MCLinear.__doc__ and "Shape:" in MCEmbedding.__doc__


def test_linear_state_dict_roundtrip():
    a = MCLinear(3, 2, nc=2, dtype=f32)
    b = MCLinear(3, 2, nc=2, dtype=f32)
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.weight.components, b.weight.components)
    assert isinstance(b.weight, hm.MCTensor)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(nc=0), ValueError, r"^MCLinear: nc must be an int >= 1; got 0$"),
        (dict(nc=-2), ValueError, r"^MCLinear: nc must be an int >= 1; got -2$"),
        (dict(nc=1.5), TypeError, r"^MCLinear: nc must be an int >= 1; got float 1\.5$"),
        (dict(nc=True), TypeError, r"^MCLinear: nc must be an int >= 1; got bool True$"),
        (dict(dtype=torch.int32), TypeError, r"^MCLinear: dtype must be one of float16, bfloat16, float32, float64; got torch\.int32$"),
        (dict(dtype="float32"), TypeError, r"^MCLinear: dtype must be a torch\.dtype"),
    ],
)
def test_linear_bad_config(kwargs, error, match):
    with pytest.raises(error, match=match):
        MCLinear(3, 2, **kwargs)


def test_linear_bad_sizes():
    with pytest.raises(ValueError, match=r"^MCLinear: in_features must be an int >= 0; got -1$"):
        MCLinear(-1, 2)
    with pytest.raises(TypeError, match=r"^MCLinear: out_features must be an int >= 0; got float 2\.0$"):
        MCLinear(3, 2.0)
    with pytest.raises(ValueError, match=r"^MCEmbedding: embedding_dim must be an int >= 0; got -2$"):
        MCEmbedding(4, -2)


def test_linear_input_dtype_mismatch():
    layer = MCLinear(3, 2, nc=2, dtype=f16)
    with pytest.raises(TypeError, match=r"input has dtype torch.float32 but the weight has component dtype torch.float16"):
        layer(torch.randn(4, 3))
    with pytest.raises(TypeError, match="component dtype"):
        layer(hm.mc(torch.randn(4, 3), nc=2, dtype=f32))


def test_linear_input_size_mismatch():
    layer = MCLinear(3, 2, nc=2, dtype=f32)
    with pytest.raises(ValueError, match="does not end in in_features=3"):
        layer(torch.randn(4, 5))


# ----------------------------------------------------------------------- MCEmbedding


def test_embedding_init_and_forward(seed):
    torch.manual_seed(seed)
    emb = MCEmbedding(10, 3, padding_idx=2, nc=2, dtype=f32)
    torch.manual_seed(seed)
    ref = nn.Embedding(10, 3, padding_idx=2)
    assert torch.equal(emb.weight.approx(), ref.weight.detach())
    idx = torch.tensor([[1, 2], [9, 1]])
    out = emb(idx)
    assert isinstance(out, hm.MCTensor) and out.shape == (2, 2, 3) and out.nc == 2
    assert torch.equal(out.components, emb.weight.components[idx])
    assert repr(emb) == "MCEmbedding(10, 3, padding_idx=2, nc=2, dtype=torch.float32)"


@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_gradient(scale_grad_by_freq, rng):
    w = torch.randn(6, 4, generator=rng, dtype=f64)
    emb = MCEmbedding(6, 4, padding_idx=0, scale_grad_by_freq=scale_grad_by_freq, _weight=w, nc=2, dtype=f64)
    ref = nn.Embedding(6, 4, padding_idx=0, scale_grad_by_freq=scale_grad_by_freq, _weight=w.clone())
    idx = torch.tensor([[1, 3, 1, 0], [5, 1, 0, 3]])
    coef = torch.randn(2, 4, 4, generator=rng, dtype=f64)
    (emb(idx) * coef).sum().backward()
    (ref(idx) * coef).sum().backward()
    assert isinstance(emb.weight.grad, hm.MCTensor) and emb.weight.grad.nc == 2
    torch.testing.assert_close(emb.weight.grad.approx(), ref.weight.grad, rtol=1e-15, atol=0)
    # against the exact gradient: each row's coefficients summed (divided by the row's count)
    rows, coefs = idx.reshape(-1).tolist(), coef.reshape(-1, 4).tolist()
    exact = np.full((6, 4), Fraction(0), dtype=object)
    for r, c in zip(rows, coefs):
        if r != 0:
            exact[r] += np.array([Fraction(v) / (rows.count(r) if scale_grad_by_freq else 1) for v in c], dtype=object)
    assert_within(emb.weight.grad, exact, f64, 2, "grad")  # measured 0 (sums) and 0.56 u^2 (scaled)
    assert torch.count_nonzero(emb.weight.grad.components[0]) == 0  # padding row


def test_embedding_bad_arguments():
    with pytest.raises(ValueError, match="max_norm is not supported"):
        MCEmbedding(4, 2, max_norm=1.0)
    with pytest.raises(ValueError, match="sparse gradients are not supported"):
        MCEmbedding(4, 2, sparse=True)
    with pytest.raises(ValueError, match="padding_idx must be within"):
        MCEmbedding(4, 2, padding_idx=4)
    with pytest.raises(ValueError, match=r"^MCEmbedding: nc must be an int >= 1; got 0$"):
        MCEmbedding(4, 2, nc=0)
    emb = MCEmbedding(4, 2, nc=2, dtype=f32)
    with pytest.raises(TypeError, match="integer"):
        emb(torch.tensor([0.0, 1.0]))
    with pytest.raises(IndexError, match=r"indices must lie in \[0, 4\)"):
        emb(torch.tensor([1, 4]))


# ------------------------------------------------------------- activations, Sequential


def _mc_f32x2(values: torch.Tensor) -> hm.MCTensor:
    return hm.mc(values.to(f64), nc=2, dtype=f32)


def _close_to_f64(got: hm.MCTensor, want: torch.Tensor, bound: str = "transcendental") -> None:
    """Within ``BOUNDS[bound]`` u^nc relative of the float64 reference, plus 1e-14 absolute
    (2.8 u^2 for float32 nc=2: the float64 reference's own error where it cancels, e.g.
    ``1 + erf(x)`` for gelu of negative x)."""
    rtol = BOUNDS[bound] * 2.0 ** (-UNIT_ROUNDOFF_BITS[got.dtype] * got.nc)
    torch.testing.assert_close(got.to(f64).approx(), want, rtol=rtol, atol=1e-14)


def test_relu_gelu_softmax_values(rng):
    x64 = torch.randn(4, 5, generator=rng, dtype=f64) * 3
    x = _mc_f32x2(x64)
    x64 = x.to(f64).approx()  # the exact values of x
    _close_to_f64(MCReLU()(x), torch.relu(x64))
    _close_to_f64(MCGELU()(x), F.gelu(x64))
    _close_to_f64(MCGELU("tanh")(x), F.gelu(x64, approximate="tanh"))
    _close_to_f64(MCSoftmax(dim=1)(x), torch.softmax(x64, dim=1))
    _close_to_f64(MCSoftmax(dim=0)(x), torch.softmax(x64, dim=0))
    assert MCGELU()(x).nc == 2 and MCSoftmax(1)(x).dtype == f32


def test_activation_of_plain_tensor_is_exact_mc(rng):
    x = torch.randn(3, 4, generator=rng, dtype=f32)
    out = MCReLU()(x)
    assert isinstance(out, hm.MCTensor) and out.nc == 1
    assert torch.equal(out.approx(), torch.relu(x))


def test_gelu_gradient(rng):
    x = _mc_f32x2(torch.randn(6, generator=rng, dtype=f64)).requires_grad_()
    MCGELU()(x).sum().backward()
    x64 = x.detach().to(f64).approx().requires_grad_()
    F.gelu(x64).sum().backward()
    _close_to_f64(x.grad, x64.grad, "grad")


def test_gelu_erf_needs_engine():
    x = hm.mc(torch.tensor([0.5], dtype=f64), nc=2)
    with pytest.raises(NotImplementedError, match="approximate='tanh'"):
        MCGELU()(x)
    MCGELU("tanh")(x)  # any nc
    with pytest.raises(ValueError, match=r"^MCGELU: approximate must be one of 'none', 'tanh'; got 'fast'$"):
        MCGELU("fast")
    with pytest.raises(TypeError, match=r"^MCSoftmax: dim must be an int; got NoneType None$"):
        MCSoftmax(None)


def test_sequential_and_to_tensor(rng):
    net = MCSequential(MCLinear(4, 8, nc=2, dtype=f32), MCToTensor(), nn.ReLU(), MCLinear(8, 3, nc=2, dtype=f32), MCReLU())
    assert net.nc == 2 and net.dtype == f32
    x = torch.randn(5, 4, generator=rng)
    hidden = net[1](net[0](x))
    assert type(hidden) is torch.Tensor
    out = net(x)
    assert isinstance(out, hm.MCTensor) and out.shape == (5, 3)
    out.sum().backward()
    for p in net.parameters():
        assert isinstance(p.grad, hm.MCTensor) and p.grad.nc == 2
    with pytest.raises(TypeError, match="MCSequential: input has dtype torch.float64"):
        net(x.double())
