"""mpmath reference of the 2-D combinatorial construction (a loop per node, no hypermc code).

Same placement rule as :func:`hypermc.embed.embed_tree` in 2-D (module docstring of
:mod:`hypermc.embed.construct`): the root at 0; a node ``v`` with ``k`` children and ``m``
direction slots (``k``, plus one for its parent if it has one) sends its ``j``-th child
(children in id order; ``j`` counted from 1 when ``v`` has a parent, slot 0 pointing to
the parent) to ``x_v (+) tanh(tau / 2) u`` where, seen from ``v``, the parent lies at angle
``theta`` and ``u`` has angle ``theta - 2 pi j / m`` (the reflection that maps angle 0 to
``theta`` maps ``2 pi j / m`` to ``theta - 2 pi j / m``); a root uses ``u`` at ``2 pi j / m``.
Everything (angles included) is computed in mpmath at ``prec`` bits.

An oracle, not a tool: slow (a Python loop per node), and it uses no hypermc code. It
lives in the package so that the tests and ``benchmarks/bench_construct.py`` share it.
"""

from __future__ import annotations

import mpmath

__all__ = ["reference_construction", "ball_distance"]


def _mobius_add(x, y):
    xy = x[0] * y[0] + x[1] * y[1]
    x2 = x[0] ** 2 + x[1] ** 2
    y2 = y[0] ** 2 + y[1] ** 2
    den = 1 + 2 * xy + x2 * y2
    return [((1 + 2 * xy + y2) * x[i] + (1 - x2) * y[i]) / den for i in range(2)]


def reference_construction(parent: list[int], tau: float, prec: int) -> list[list[mpmath.mpf]]:
    """Ball coordinates (mpf pairs) of every node; ``parent[i]`` is ``-1`` for the root.

    Example:
        >>> x = reference_construction([-1, 0, 0, 1], tau=5.0, prec=200)  # root 0; 3 under 1
        >>> [float(v) for v in x[1]], float(x[2][0])  # the root's children at angles 0 and pi
        ([0.9866142981514303, 0.0], -0.9866142981514303)
        >>> round(float(ball_distance(x[0], x[3], 200)), 12)  # two edges of length tau
        10.0
    """
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    for i, p in enumerate(parent):
        if p >= 0:
            children[p].append(i)
    with mpmath.workprec(prec):
        t = mpmath.tanh(mpmath.mpf(tau) / 2)
        x: list = [None] * n
        root = parent.index(-1)
        x[root] = [mpmath.mpf(0), mpmath.mpf(0)]
        todo = [root]
        while todo:
            v = todo.pop()
            kids = children[v]
            has_gp = parent[v] >= 0
            m = len(kids) + (1 if has_gp else 0)
            if has_gp:
                d = _mobius_add([-x[v][0], -x[v][1]], x[parent[v]])
                theta = mpmath.atan2(d[1], d[0])
            for r, c in enumerate(kids):
                j = r + (1 if has_gp else 0)
                ang = theta - 2 * mpmath.pi * j / m if has_gp else 2 * mpmath.pi * j / m
                x[c] = _mobius_add(x[v], [t * mpmath.cos(ang), t * mpmath.sin(ang)])
                todo.append(c)
        return x


def ball_distance(a, b, prec: int) -> mpmath.mpf:
    """``acosh(1 + 2 |a - b|^2 / ((1 - |a|^2)(1 - |b|^2)))`` in mpmath.

    Example:
        >>> d = ball_distance([mpmath.mpf(0), mpmath.mpf(0)], [mpmath.mpf("0.5"), mpmath.mpf(0)], 100)
        >>> mpmath.nstr(d, 20)  # 2 atanh(1/2) = log 3
        '1.0986122886681096914'
    """
    with mpmath.workprec(prec):
        diff = (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2
        den = (1 - a[0] ** 2 - a[1] ** 2) * (1 - b[0] ** 2 - b[1] ** 2)
        return mpmath.acosh(1 + 2 * diff / den)
