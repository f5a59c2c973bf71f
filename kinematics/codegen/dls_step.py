"""Damped least-squares steps for small systems, as generated straight-line Python.

``dls_step(m, n)`` returns a function ``f(columns, e, lam2, w, z) -> dq`` that
minimises ``|W^½ (J dq - e)|² + lam2 |dq - z|²`` for ``J`` given as ``n``
columns of ``m`` floats, where ``W`` weighs rows 3.. by ``w²`` (the orientation
rows) and ``z`` is a preferred step (a rest-pose pull: it acts in the null space
of the task as ``lam2`` goes to zero). The normal equations are solved by an
unrolled Cholesky factorisation of the smaller of ``J Jᵀ`` and ``Jᵀ J``. For the
at most 6x6 systems of IK this is several times faster than numpy's per-call
overhead. Functions are generated once per ``(m, n)`` and cached.

A matrix that is not positive definite (``lam2`` too small for a singular ``J``)
raises ``ArithmeticError`` (``ValueError`` from ``sqrt`` or ``ZeroDivisionError``
are both mapped to it); callers increase the damping.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

StepFunction = Callable[[list[list[float]], list[float], float, float, list[float]], list[float]]


def dls_step(m: int, n: int, *, preferred: bool = True) -> StepFunction:
    """The damped least-squares step function for ``m`` task rows and ``n`` columns.

    With ``preferred=False`` the generated code ignores ``z`` (taken as zero), which
    saves the ``J z`` product when there is no rest pose.
    """
    inner = _compiled(m, n, preferred)

    def step(
        columns: list[list[float]], e: list[float], lam2: float, w: float, z: list[float]
    ) -> list[float]:
        try:
            return inner(columns, e, lam2, w, z)  # type: ignore[no-any-return]
        except (ValueError, ZeroDivisionError) as exc:
            raise ArithmeticError("normal matrix not positive definite") from exc

    return step


@functools.cache
def _compiled(m: int, n: int, preferred: bool) -> Callable[..., Any]:
    namespace: dict[str, Any] = {"sqrt": math.sqrt}
    source = _source(m, n, preferred)
    exec(compile(source, f"<hilbot dls {m}x{n}>", "exec"), namespace)
    return namespace["f"]  # type: ignore[no-any-return]


def _sum(terms: list[str]) -> str:
    return " + ".join(terms) if terms else "0.0"


def _source(m: int, n: int, preferred: bool) -> str:
    lines = ["def f(c, e, lam2, w, z):"]
    for k in range(n):  # columns may hold more rows than the task uses (6 for m=3)
        lines.append(f"    c{k} = c[{k}]")
        lines.extend(f"    j{i}_{k} = c{k}[{i}]" + (" * w" if i >= 3 else "") for i in range(m))
    lines.extend(f"    r{i} = e[{i}]" for i in range(m))
    lines.extend(f"    r{i} *= w" for i in range(3, m))
    if preferred:  # residual of the preferred step: r = e - J z
        lines.append(f"    {', '.join(f'z{k}' for k in range(n))}, = z")
        for i in range(m):
            lines.append(f"    r{i} -= {_sum([f'j{i}_{k}*z{k}' for k in range(n)])}")
    if n >= m:  # (J Jᵀ + lam2 I) y = r, dq = z + Jᵀ y
        size = m
        for a in range(m):
            for b in range(a + 1):
                dot = _sum([f"j{a}_{k}*j{b}_{k}" for k in range(n)])
                lines.append(f"    a{a}_{b} = {dot}" + (" + lam2" if a == b else ""))
        lines.extend(f"    b{i} = r{i}" for i in range(m))
    else:  # (Jᵀ J + lam2 I) x = Jᵀ r, dq = z + x
        size = n
        for a in range(n):
            for b in range(a + 1):
                dot = _sum([f"j{i}_{a}*j{i}_{b}" for i in range(m)])
                lines.append(f"    a{a}_{b} = {dot}" + (" + lam2" if a == b else ""))
        for a in range(n):
            lines.append(f"    b{a} = {_sum([f'j{i}_{a}*r{i}' for i in range(m)])}")
    lines.extend(_cholesky_solve(size))
    plus = [f"z{k} + " if preferred else "" for k in range(n)]
    if n >= m:
        out = [plus[k] + _sum([f"j{i}_{k}*x{i}" for i in range(m)]) for k in range(n)]
    else:
        out = [f"{plus[k]}x{k}" for k in range(n)]
    lines.append(f"    return [{', '.join(out)}]")
    return "\n".join(lines) + "\n"


def _cholesky_solve(size: int) -> list[str]:
    """Lines solving ``A x = b`` (lower triangle ``a{i}_{j}``) into ``x0..``."""
    lines = []
    for i in range(size):
        for j in range(i + 1):
            acc = " - ".join([f"a{i}_{j}"] + [f"l{i}_{k}*l{j}_{k}" for k in range(j)])
            if i == j:
                lines.append(f"    l{i}_{i} = sqrt({acc})")
                lines.append(f"    d{i} = 1.0 / l{i}_{i}")
            else:
                lines.append(f"    l{i}_{j} = ({acc}) * d{j}")
    for i in range(size):
        acc = " - ".join([f"b{i}"] + [f"l{i}_{k}*y{k}" for k in range(i)])
        lines.append(f"    y{i} = ({acc}) * d{i}")
    for i in reversed(range(size)):
        acc = " - ".join([f"y{i}"] + [f"l{k}_{i}*x{k}" for k in range(i + 1, size)])
        lines.append(f"    x{i} = ({acc}) * d{i}")
    return lines
