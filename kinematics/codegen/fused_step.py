"""One DLS iteration per chain as one generated function: FK, Jacobian, error, step.

``fused_step(kernel, rows, ...)`` writes out, as straight-line Python on floats,
what one ``DLSSolver`` iteration does on a scalar chain: the chain's FK and
Jacobian (``ScalarKernel.expressions``), the position and rotation-vector error
(``context.evaluate``), the weighted cost, the clamp of the error, the
error-scaled damping and the damped least-squares step (``dls_step.dls_step``),
the max-step scaling and the check that the step stays in the box. The Jacobian
never becomes a list: its entries stay local variables, constant entries are
folded (zero terms dropped), and the solver's parameters are baked in as
literals. Every operation is the one the general path performs, in the same
order, so both give the same floats.

The function ``f(q, point, rot, mu, limit, lo, hi, tol, otol)`` evaluates the
task at ``q`` and returns ``(position, angle, cost, code, payload)``:

- ``code == OK``: ``payload`` is the next configuration ``q + dq`` (a list);
- ``SKIPPED``: converged (``position <= tol`` and ``angle <= otol``) or
  ``cost >= limit`` (the caller will not step from ``q``), no step computed;
- ``NEAR_PI``: the rotation error is near half a turn (numpy's ``so3_log`` is
  needed); nothing else is valid;
- ``GENERAL``: the step needs the general path (not positive definite, zero,
  or leaving the box: the active set); ``payload`` is ``(error, columns)``,
  the unclamped error and the Jacobian columns at ``q``, as ``evaluate`` gives.

``angle`` is ``None`` for a position-only task (``rows == 3``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from hilbot.kinematics.codegen.dls_step import _cholesky_solve
from hilbot.kinematics.codegen.scalar_kernel import POSE_DONE, ScalarKernel

OK, SKIPPED, NEAR_PI, GENERAL = 0, 1, 2, 3
_NEAR_PI = math.pi - 1e-4  # as in ``context._rotation_error``

FusedStep = Callable[..., tuple[float, float | None, float, int, Any]]
_CACHE: dict[tuple[Any, ...], FusedStep] = {}
_CACHE_SIZE = 64


def fused_step(
    kernel: ScalarKernel,
    rows: int,
    *,
    damping: float,
    weight: float,
    position_clamp: float,
    orientation_clamp: float,
    max_step: float,
    bounded: bool,
) -> FusedStep:
    """The fused iteration of ``kernel``'s chain for a task of ``rows`` (3 or 6) rows.

    Args:
        kernel: the chain's ``ScalarKernel`` (``supported``).
        rows: 3 for a position target, 6 for a full pose.
        damping: ``DLSSolver.damping``.
        weight: ``DLSSolver.orientation_weight``.
        position_clamp: ``DLSSolver.position_clamp``.
        orientation_clamp: ``DLSSolver.orientation_clamp``.
        max_step: ``DLSSolver.max_step``.
        bounded: emit the box check (the per-call box has a finite side).

    Returns:
        The compiled function (see the module docstring).
    """
    # Compiling takes some 20-50 ms: solvers on chains of the same geometry share it.
    key: tuple[Any, ...] = (kernel.source, rows, damping, weight, position_clamp)
    key += (orientation_clamp, max_step, bounded)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    source = _source(
        kernel, rows, damping, weight, position_clamp, orientation_clamp, max_step, bounded
    )
    namespace: dict[str, Any] = {"cos": math.cos, "sin": math.sin, "sqrt": math.sqrt}
    namespace["atan2"] = math.atan2
    # The source holds only numbers from the URDF and the solver, formatted with repr.
    exec(compile(source, "<hilbot dls fused>", "exec"), namespace)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    f: FusedStep = namespace["f"]
    _CACHE[key] = f
    return f


Value = float | str  # a constant or the name of a variable
_QREF = re.compile(r"q\[(\d+)\]")


def _value(text: str) -> Value:
    try:
        return float(text)
    except ValueError:
        return text


def _lit(value: Value) -> str:
    return f"({value!r})" if isinstance(value, float) else value


def _dot(pairs: list[tuple[Value, Value]]) -> str:
    """``a0*b0 + a1*b1 + ...`` in order, dropping zero terms and folding constants."""
    terms = []
    for a, b in pairs:
        if isinstance(a, float) and isinstance(b, float):
            if a * b != 0.0:
                terms.append(_lit(a * b))
        elif a == 0.0 or b == 0.0:
            continue
        elif a == 1.0:
            terms.append(_lit(b))
        elif b == 1.0:
            terms.append(_lit(a))
        else:
            terms.append(f"{_lit(a)}*{_lit(b)}")
    return " + ".join(terms) if terms else "0.0"


def _source(
    kernel: ScalarKernel,
    rows: int,
    damping: float,
    weight: float,
    position_clamp: float,
    orientation_clamp: float,
    max_step: float,
    bounded: bool,
) -> str:
    lines, pose, columns = kernel.expressions()
    split = lines.index(POSE_DONE)
    n = len(columns)
    w2 = weight * weight
    out = [
        "def f(q, point, rot, mu, limit, lo, hi, tol, otol, "
        "cos=cos, sin=sin, sqrt=sqrt, atan2=atan2):",
        f"    {', '.join(f'q_{k}' for k in range(n))}, = q",
        *[_QREF.sub(r"q_\1", line) for line in lines[:split]],
        "    tx, ty, tz = point",
        f"    ex = tx - {pose[3]}",
        f"    ey = ty - {pose[7]}",
        f"    ez = tz - {pose[11]}",
        "    pp = ex * ex + ey * ey + ez * ez",
        "    position = sqrt(pp)",
    ]
    if rows == 6:
        p00, p01, p02, p10, p11, p12, p20, p21, p22 = (
            _lit(_value(pose[i])) for i in (0, 1, 2, 4, 5, 6, 8, 9, 10)
        )
        out += [
            "    t00, t01, t02, t10, t11, t12, t20, t21, t22 = rot",
            f"    trace = (t00 * {p00} + t01 * {p01} + t02 * {p02} + t10 * {p10} + t11 * {p11}"
            f" + t12 * {p12} + t20 * {p20} + t21 * {p21} + t22 * {p22})",
            f"    vx = (t20 * {p10} + t21 * {p11} + t22 * {p12})"
            f" - (t10 * {p20} + t11 * {p21} + t12 * {p22})",
            f"    vy = (t00 * {p20} + t01 * {p21} + t02 * {p22})"
            f" - (t20 * {p00} + t21 * {p01} + t22 * {p02})",
            f"    vz = (t10 * {p00} + t11 * {p01} + t12 * {p02})"
            f" - (t00 * {p10} + t01 * {p11} + t02 * {p12})",
            "    s2 = sqrt(vx * vx + vy * vy + vz * vz)",
            "    angle = atan2(0.5 * s2, 0.5 * (trace - 1.0))",
            f"    if not angle < {_NEAR_PI!r}:",
            f"        return position, angle, 0.0, {NEAR_PI}, None",
            "    k = angle / s2 if s2 > 1e-12 else 0.5",
            "    wx = vx * k",
            "    wy = vy * k",
            "    wz = vz * k",
            "    oo = wx * wx + wy * wy + wz * wz",
            f"    cost = pp + {w2!r} * oo",
            "    if position <= tol and angle <= otol or cost >= limit:",
            f"        return position, angle, cost, {SKIPPED}, None",
        ]
        error = ["ex", "ey", "ez", "wx", "wy", "wz"]
    else:
        out += [
            "    cost = pp",
            "    angle = None",
            "    if position <= tol or cost >= limit:",
            f"        return position, angle, cost, {SKIPPED}, None",
        ]
        error = ["ex", "ey", "ez"]
    general = (
        f"position, angle, cost, {GENERAL}, "
        f"([{', '.join(error)}], [{', '.join('[' + ', '.join(c) + ']' for c in columns)}])"
    )
    out += [_QREF.sub(r"q_\1", line) for line in lines[split + 1 :]]  # the Jacobian
    # The clamp (``dls_solver._clamp``); unclamped, the damping's error term is the cost itself.
    if rows == 6:
        out += [
            "    o = sqrt(oo)",
            f"    if position > {position_clamp!r} or o > {orientation_clamp!r}:",
            f"        kp = {position_clamp!r} / position if position > {position_clamp!r} else 1.0",
            f"        ko = {orientation_clamp!r} / o if o > {orientation_clamp!r} else 1.0",
            "        c0 = ex * kp",
            "        c1 = ey * kp",
            "        c2 = ez * kp",
            "        c3 = wx * ko",
            "        c4 = wy * ko",
            "        c5 = wz * ko",
            f"        lam2 = mu * ({damping!r} + 0.5 * (c0 * c0 + c1 * c1 + c2 * c2"
            f" + {w2!r} * (c3 * c3 + c4 * c4 + c5 * c5)))",
            "    else:",
            "        c0, c1, c2, c3, c4, c5 = ex, ey, ez, wx, wy, wz",
            f"        lam2 = mu * ({damping!r} + 0.5 * cost)",
            f"    r3 = c3 * {weight!r}",
            f"    r4 = c4 * {weight!r}",
            f"    r5 = c5 * {weight!r}",
        ]
    else:
        out += [
            f"    if position > {position_clamp!r}:",
            f"        kp = {position_clamp!r} / position",
            "        c0 = ex * kp",
            "        c1 = ey * kp",
            "        c2 = ez * kp",
            f"        lam2 = mu * ({damping!r} + 0.5 * (c0 * c0 + c1 * c1 + c2 * c2))",
            "    else:",
            "        c0, c1, c2 = ex, ey, ez",
            f"        lam2 = mu * ({damping!r} + 0.5 * cost)",
        ]
    r: list[Value] = list(("c0", "c1", "c2", "r3", "r4", "r5")[:rows])
    # The weighted Jacobian: j[i][k], rows 3.. times the weight.
    j: list[list[Value]] = [[0.0] * n for _ in range(rows)]
    for k, column in enumerate(columns):
        for i in range(rows):
            v = _value(column[i])
            if i < 3:
                j[i][k] = v
            elif isinstance(v, float):
                j[i][k] = v * weight
            else:
                j[i][k] = f"j{i}_{k}"
                out.append(f"    j{i}_{k} = {v} * {weight!r}")
    out.append("    try:")
    out += _indent(_normal_solve(j, r, rows, n, jjt=n >= rows), 2)
    out += ["    except (ValueError, ZeroDivisionError):", f"        return {general}"]
    if bounded:
        inside = " and ".join(f"lo[{k}] <= q_{k} + dq{k} <= hi[{k}]" for k in range(n))
        out += [f"    if not ({inside}):"]
        active = _active_set(j, columns, rows, n, weight, general)
        out += _indent(active, 2)
        out += _indent(_finish(n, max_step, general, clip=True), 2)
    out += _finish(n, max_step, general, clip=False)
    return "\n".join(out) + "\n"


def _indent(lines: list[str], levels: int) -> list[str]:
    """``lines`` (4-space indented) indented ``levels - 1`` more levels."""
    pad = "    " * (levels - 1)
    return [pad + line for line in lines]


def _finish(n: int, max_step: float, general: str, *, clip: bool) -> list[str]:
    """The zero-step check, the max-step scaling and the return of ``q + dq``.

    With ``clip``, pinned coordinates (``f<k> == 0.0``) are clipped into the box against
    rounding (``dls_solver._Run.clip``).
    """
    if clip:
        moved = ", ".join(
            f"min(max(q_{k} + dq{k}, lo[{k}]), hi[{k}]) if f{k} == 0.0 else q_{k} + dq{k}"
            for k in range(n)
        )
    else:
        moved = ", ".join(f"q_{k} + dq{k}" for k in range(n))
    return [
        f"    big = max({', '.join(f'dq{k}, -dq{k}' for k in range(n))})",
        "    if big < 1e-14:",
        f"        return {general}",
        f"    if big > {max_step!r}:",
        f"        s = {max_step!r} / big",
        *[f"        dq{k} = dq{k} * s" for k in range(n)],
        f"    return position, angle, cost, {OK}, [{moved}]",
    ]


def _normal_solve(
    j: list[list[Value]],
    r: list[Value],
    rows: int,
    n: int,
    *,
    jjt: bool,
    free: bool = False,
    names: list[int] | None = None,
) -> list[str]:
    """Lines solving the damped system for ``dq0..`` (``dls_step._source`` without ``z``).

    ``jjt``: ``(J W Jᵀ + lam2 I) y = W e, dq = Jᵀ y``; otherwise
    ``(Jᵀ W J + lam2 I) dq = Jᵀ W e``. ``j`` is the weighted Jacobian, ``r`` the
    weighted error. With ``free``, only coordinates with ``f<k>`` set are assigned;
    ``names`` maps the columns of ``j`` to the coordinates ``dq<name>`` they solve for.
    """
    out_names = list(range(n)) if names is None else names
    lines: list[str] = []
    if jjt:
        size = rows
        for a in range(rows):
            for b in range(a + 1):
                dot = _dot([(j[a][k], j[b][k]) for k in range(n)])
                lines.append(f"    a{a}_{b} = {dot}" + (" + lam2" if a == b else ""))
        lines += [f"    b{i} = {_lit(r[i])}" for i in range(rows)]
    else:
        size = n
        for a in range(n):
            for b in range(a + 1):
                dot = _dot([(j[i][a], j[i][b]) for i in range(rows)])
                lines.append(f"    a{a}_{b} = {dot}" + (" + lam2" if a == b else ""))
        for a in range(n):
            lines.append(f"    b{a} = {_dot([(j[i][a], r[i]) for i in range(rows)])}")
    lines += _cholesky_solve(size)
    for k in range(n):
        value = _dot([(j[i][k], f"x{i}") for i in range(rows)]) if jjt else f"x{k}"
        name = out_names[k]
        if free:
            lines += [f"    if f{name}:", f"        dq{name} = {value}"]
        else:
            lines.append(f"    dq{name} = {value}")
    return lines


def _active_set(
    j: list[list[Value]],
    columns: list[list[str]],
    rows: int,
    n: int,
    weight: float,
    general: str,
) -> list[str]:
    """Lines of the active set of ``dls_solver._Run.step``: pin what leaves the box, re-solve.

    ``f<k>`` is 1.0 while coordinate ``k`` is free, 0.0 once pinned; the re-solve uses
    the Jacobian with the pinned columns zeroed, which gives the same floats as the
    reduced system (the added terms are exact zeros), in the form the reduced system
    would use (``J Jᵀ`` while at least ``rows`` columns are free).
    """
    lines = [f"    g{i} = c{i}" for i in range(rows)]
    lines += [f"    f{k} = 1.0" for k in range(n)]
    # The masked weighted Jacobian, refreshed after each round of pinning.
    masked: list[list[Value]] = [
        [0.0 if j[i][k] == 0.0 else f"m{i}_{k}" for k in range(n)] for i in range(rows)
    ]
    rw: list[Value] = [f"g{i}" if i < 3 else f"u{i}" for i in range(rows)]
    body = ["        pinned = False"]
    for k in range(n):
        body += [
            f"        if f{k} and not lo[{k}] <= q_{k} + dq{k} <= hi[{k}]:",
            f"            d = (hi[{k}] if q_{k} + dq{k} > hi[{k}] else lo[{k}]) - q_{k}",
            f"            dq{k} = d",
        ]
        for i in range(rows):
            c = _value(columns[k][i])
            if c == 0.0:
                continue
            body.append(
                f"            g{i} -= {_lit(c)} * d" if c != 1.0 else f"            g{i} -= d"
            )
        body += [f"            f{k} = 0.0", "            pinned = True"]
    body += [
        "        if not pinned:",
        "            break",
        f"        nfree = {' + '.join(f'f{k}' for k in range(n))}",
        "        if not nfree:",
        "            break",
    ]
    body += [f"        u{i} = g{i} * {weight!r}" for i in range(3, rows)]
    # One pinned coordinate (the common case): the reduced system itself, per coordinate.
    body.append(f"        if nfree == {n - 1}:")
    for p in range(n):
        keep = [k for k in range(n) if k != p]
        reduced = [[j[i][k] for k in keep] for i in range(rows)]
        solve = _normal_solve(reduced, rw, rows, n - 1, jjt=n - 1 >= rows, names=keep)
        body += [f"            {'if' if p == 0 else 'elif'} f{p} == 0.0:", *_indent(solve, 5)]
    body.append("            continue")
    # More pinned: the Jacobian with the pinned columns zeroed.
    for i in range(rows):
        for k in range(n):
            if masked[i][k] != 0.0:
                body.append(f"        m{i}_{k} = {_lit(j[i][k])} * f{k}")
    jjt = _normal_solve(masked, rw, rows, n, jjt=True, free=True)
    jtj = _normal_solve(masked, rw, rows, n, jjt=False, free=True)
    if n - 2 >= rows:  # the reduced system may have rows or more columns
        body += [
            f"        if nfree >= {rows}:",
            *_indent(jjt, 3),
            "        else:",
            *_indent(jtj, 3),
        ]
    else:  # fewer than rows free columns: Jᵀ J
        body += _indent(jtj, 2)
    return [
        *lines,
        "    try:",
        "        while True:",
        *_indent(body, 2),
        "    except (ValueError, ZeroDivisionError):",
        f"        return {general}",
    ]
