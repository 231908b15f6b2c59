"""Argument checks shared by every public boundary (constructors, functions, loaders, CLI).

One rule for all of hypermc: a value of the wrong *type* raises ``TypeError``, a value of
the right type outside its range raises ``ValueError``; the message starts with the
caller (``where``, e.g. ``"train"`` or ``"MCLinear"``), names the argument, says what was
expected and shows what was seen::

    train: batch_size must be an int >= 1; got 0

Every helper returns the checked value (normalised: ``float`` for reals), so a caller can
write ``self.p = check_real("Dropout", "p", p, minimum=0.0, maximum=1.0, open_max=True)``.
Checks run at boundaries only, never inside kernels (docs: STYLE.md, "Errors").

Example:
    >>> check_int("train", "epochs", 10, minimum=0)
    10
    >>> check_int("train", "batch_size", 0)
    Traceback (most recent call last):
    ...
    ValueError: train: batch_size must be an int >= 1; got 0
    >>> check_choice("train", "lr_schedule", "cosine", ("constant", "linear"))
    Traceback (most recent call last):
    ...
    ValueError: train: lr_schedule must be one of 'constant', 'linear'; got 'cosine'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch

__all__ = [
    "FLOAT_DTYPES",
    "check_int",
    "check_real",
    "check_bool",
    "check_choice",
    "check_nc",
    "check_dtype",
    "check_instance",
    "check_callable",
    "check_lr",
    "check_sgd_args",
    "check_adam_args",
    "check_grad",
]

#: The floating dtypes an MC component (or a plain parameter) may have.
FLOAT_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

T = TypeVar("T")


def _type_name(value: Any) -> str:
    return type(value).__name__


def check_int(where: str, name: str, value: Any, *, minimum: int | None = 1, maximum: int | None = None, allow_none: bool = False) -> Any:
    """``value`` as an int in ``[minimum, maximum]`` (``bool`` is not an int here).

    Raises:
        TypeError: not an int (nor ``None`` when ``allow_none``).
        ValueError: outside the range.

    Example:
        >>> check_int("train", "epochs", 10, minimum=0), check_int("TrainConfig", "checkpoint_every", None, allow_none=True)
        (10, None)
        >>> check_int("train", "epochs", 2.0)
        Traceback (most recent call last):
        ...
        TypeError: train: epochs must be an int >= 1; got float 2.0
    """
    if value is None and allow_none:
        return None
    none = " or None" if allow_none else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{where}: {name} must be an int{_range(minimum, maximum)}{none}; got {_type_name(value)} {value!r}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{where}: {name} must be an int{_range(minimum, maximum)}{none}; got {value!r}")
    return value


def _range(minimum: Any, maximum: Any, open_min: bool = False, open_max: bool = False) -> str:
    if minimum is not None and maximum is not None:
        return f" in {'(' if open_min else '['}{minimum}, {maximum}{')' if open_max else ']'}"
    if minimum is not None:
        return f" {'>' if open_min else '>='} {minimum}"
    if maximum is not None:
        return f" {'<' if open_max else '<='} {maximum}"
    return ""


def check_real(
    where: str,
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    open_min: bool = False,
    open_max: bool = False,
    allow_none: bool = False,
) -> Any:
    """``value`` as a finite ``float`` in the given range (open ends with ``open_min``/``open_max``).

    Accepts Python and numpy reals and 0-d real tensors (read with ``.item()``);
    ``bool`` is refused.

    Raises:
        TypeError: not a real number (nor ``None`` when ``allow_none``).
        ValueError: NaN, infinite, or outside the range.

    Example:
        >>> check_real("MCSGD", "lr", 0.1, minimum=0.0)
        0.1
        >>> check_real("train", "scale", 0.0, minimum=0.0, open_min=True)
        Traceback (most recent call last):
        ...
        ValueError: train: scale must be a finite number > 0.0; got 0.0
    """
    if value is None and allow_none:
        return None
    none = " or None" if allow_none else ""
    expected = f"a finite number{_range(minimum, maximum, open_min, open_max)}{none}"
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be {expected}; got {_type_name(value)} {value!r}")
    value = float(value)
    bad = not math.isfinite(value)
    if minimum is not None:
        bad = bad or value < minimum or (open_min and value == minimum)
    if maximum is not None:
        bad = bad or value > maximum or (open_max and value == maximum)
    if bad:
        raise ValueError(f"{where}: {name} must be {expected}; got {value!r}")
    return value


def check_bool(where: str, name: str, value: Any) -> bool:
    """``value`` if it is a ``bool`` (0/1 and truthy objects are refused: they hide typos).

    Example:
        >>> check_bool("RiemannianSGD", "retraction", True)
        True
        >>> check_bool("MCSGD", "nesterov", 1)
        Traceback (most recent call last):
        ...
        TypeError: MCSGD: nesterov must be True or False; got int 1
    """
    if not isinstance(value, bool):
        raise TypeError(f"{where}: {name} must be True or False; got {_type_name(value)} {value!r}")
    return value


def check_choice(where: str, name: str, value: Any, choices: Iterable[T]) -> T:
    """``value`` if it is one of ``choices`` (compared with ``==``), else ``ValueError``.

    Example:
        >>> check_choice("train", "lr_schedule", "linear", ("constant", "linear"))
        'linear'
    """
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{where}: {name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_nc(where: str, nc: Any, *, allow_none: bool = False, what_none: str = "plain tensors") -> Any:
    """The component count ``nc``: an int >= 1 (or ``None``, meaning ``what_none``).

    Example:
        >>> check_nc("MCLinear", 3), check_nc("TrainConfig", None, allow_none=True)
        (3, None)
        >>> check_nc("MCLinear", 0)
        Traceback (most recent call last):
        ...
        ValueError: MCLinear: nc must be an int >= 1; got 0
    """
    if nc is None and allow_none:
        return None
    if isinstance(nc, bool) or not isinstance(nc, numbers.Integral) or nc < 1:
        none = f" or None ({what_none})" if allow_none else ""
        exc = ValueError if isinstance(nc, numbers.Integral) and not isinstance(nc, bool) else TypeError
        seen = f"{nc!r}" if exc is ValueError else f"{_type_name(nc)} {nc!r}"
        raise exc(f"{where}: nc must be an int >= 1{none}; got {seen}")
    return int(nc)


def check_dtype(where: str, dtype: Any, allowed: tuple[torch.dtype, ...] = FLOAT_DTYPES, name: str = "dtype") -> torch.dtype:
    """``dtype`` if it is one of ``allowed`` (default: the four floating dtypes).

    Example:
        >>> check_dtype("mc", torch.float32)
        torch.float32
        >>> check_dtype("mc", torch.int64)
        Traceback (most recent call last):
        ...
        TypeError: mc: dtype must be one of float16, bfloat16, float32, float64; got torch.int64
    """
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{where}: {name} must be a torch.dtype ({_names(allowed)}); got {_type_name(dtype)} {dtype!r}")
    if dtype not in allowed:
        raise TypeError(f"{where}: {name} must be one of {_names(allowed)}; got {dtype}")
    return dtype


def _names(dtypes: tuple[torch.dtype, ...]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def check_instance(where: str, name: str, value: Any, types: type | tuple[type, ...], expected: str) -> Any:
    """``value`` if ``isinstance(value, types)``; ``expected`` says it in words (``"a Graph"``).

    Example:
        >>> edges = torch.tensor([[1, 0], [2, 0]])
        >>> check_instance("evaluate", "edges", edges, torch.Tensor, "an (E, 2) int64 tensor") is edges
        True
        >>> check_instance("evaluate", "edges", [[1, 0], [2, 0]], torch.Tensor, "an (E, 2) int64 tensor")
        Traceback (most recent call last):
        ...
        TypeError: evaluate: edges must be an (E, 2) int64 tensor; got list
    """
    if not isinstance(value, types):
        raise TypeError(f"{where}: {name} must be {expected}; got {_type_name(value)}")
    return value


def check_callable(where: str, name: str, value: Any, example: str = "") -> Callable:
    """``value`` if it is callable; ``example`` (e.g. ``"torch.relu"``) is shown in the message.

    Example:
        >>> check_callable("MCSequential", "activation", torch.relu) is torch.relu
        True
        >>> check_callable("MCSequential", "activation", "relu", "torch.relu")
        Traceback (most recent call last):
        ...
        TypeError: MCSequential: activation must be callable (e.g. torch.relu); got str
    """
    if not callable(value):
        hint = f" (e.g. {example})" if example else ""
        raise TypeError(f"{where}: {name} must be callable{hint}; got {_type_name(value)}")
    return value


# ------------------------------------------------------------------ optimizer hyperparameters
# Messages follow torch.optim's ("Invalid learning rate: ..."), which PyTorch users search for;
# unlike torch.optim, NaN and infinity are refused too.


def _finite_at_least_zero(value: Any) -> bool:
    v = value.item() if isinstance(value, torch.Tensor) else value
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and 0.0 <= float(v) < math.inf


def check_lr(lr: Any, *, tensor_ok: bool = True) -> None:
    """A learning rate: a finite real ``>= 0`` (a 1-element tensor where ``tensor_ok``).

    Example:
        >>> check_lr(0.1)
        >>> check_lr(float("inf"))
        Traceback (most recent call last):
        ...
        ValueError: Invalid learning rate: inf (lr must be a finite number >= 0)
    """
    if isinstance(lr, torch.Tensor):
        if not tensor_ok:
            raise TypeError("lr must be a Python float for the Riemannian optimizers; got a Tensor")
        if lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
    if not _finite_at_least_zero(lr):
        raise ValueError(f"Invalid learning rate: {lr} (lr must be a finite number >= 0)")


def check_sgd_args(momentum: Any, dampening: Any, weight_decay: Any, nesterov: Any) -> None:
    """SGD hyperparameters (MC and Riemannian): finite, ``>= 0``; Nesterov needs momentum and no dampening.

    Example:
        >>> check_sgd_args(0.9, 0.0, 0.0, True)
        >>> check_sgd_args(float("nan"), 0.0, 0.0, False)
        Traceback (most recent call last):
        ...
        ValueError: Invalid momentum value: nan (momentum must be a finite number >= 0)
    """
    for name, value in (("momentum", momentum), ("dampening", dampening), ("weight_decay", weight_decay)):
        if not _finite_at_least_zero(value):
            raise ValueError(f"Invalid {name} value: {value} ({name} must be a finite number >= 0)")
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError("Nesterov momentum requires a momentum and zero dampening")


def check_adam_args(betas: Any, eps: Any, weight_decay: Any) -> None:
    """Adam hyperparameters (MC and Riemannian): betas in ``[0, 1)``, finite ``eps``/``weight_decay >= 0``.

    Example:
        >>> check_adam_args((0.9, 0.999), 1e-8, 0.0)
        >>> check_adam_args((0.9, 1.0), 1e-8, 0.0)
        Traceback (most recent call last):
        ...
        ValueError: Invalid beta parameter at index 1: 1.0 (must be in [0, 1))
    """
    if not _finite_at_least_zero(eps):
        raise ValueError(f"Invalid epsilon value: {eps} (eps must be a finite number >= 0)")
    if len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2); got {betas!r}")
    for i, beta in enumerate(betas):
        if not (_finite_at_least_zero(beta) and beta < 1.0):
            raise ValueError(f"Invalid beta parameter at index {i}: {beta} (must be in [0, 1))")
    if not _finite_at_least_zero(weight_decay):
        raise ValueError(f"Invalid weight_decay value: {weight_decay} (weight_decay must be a finite number >= 0)")


def check_grad(param: torch.Tensor, grad: torch.Tensor, *, sparse_hint: str) -> None:
    """A gradient for ``param``: the parameter's (component) dtype, dense.

    Example:
        >>> p = torch.zeros(2)
        >>> check_grad(p, torch.zeros(2, dtype=torch.float64), sparse_hint="")
        Traceback (most recent call last):
        ...
        TypeError: gradient dtype torch.float64 differs from the parameter's dtype torch.float32; ...
    """
    if grad.dtype != param.dtype:
        raise TypeError(
            f"gradient dtype {grad.dtype} differs from the parameter's dtype {param.dtype}; "
            "gradients must have the parameter's (component) dtype"
        )
    if grad.is_sparse:
        raise RuntimeError(sparse_hint)
