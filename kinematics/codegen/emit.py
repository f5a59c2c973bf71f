"""Straight-line code emission with constant folding, shared by the generated kernels.

Three kernels are written as Python source once per chain and compiled: the chain's FK
and Jacobian (``codegen.chain_kernels``), the scalar IK kernel (``codegen.scalar_kernel``)
and the batched IK kernel (``codegen.batch_kernel``, whose variables are arrays).
All of them build sums of products of constants and variables; :class:`Emitter` folds
the constants while it writes them, so terms with a zero factor (most of them, in
axis-aligned URDF frames) cost nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

Value = float | str  # a folded constant or the name of a generated variable
Term = tuple[float, Value, Value]  # coefficient * a * b
_EPS = 1e-15


class Emitter:
    """Straight-line code with constant folding over sums of ``coef * a * b``.

    ``a`` and ``b`` are folded constants or variable names. A name may carry a leading
    ``-``: negation is folded into the coefficients of the expressions that use it, so
    it never costs an operation (on floats or on arrays).
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._count = 0
        self._known: dict[str, str] = {}  # expression -> name: each is computed once

    def combine(self, terms: Sequence[Term]) -> Value:
        """``sum(coef * a * b)``: a folded constant or a (possibly negated) name."""
        constant = 0.0
        parts: list[tuple[float, str]] = []
        for coef, a, b in terms:
            names: list[str] = []
            for x in (a, b):
                if isinstance(x, float):
                    coef *= x
                elif x.startswith("-"):
                    coef, names = -coef, [*names, x[1:]]
                else:
                    names.append(x)
            if abs(coef) < _EPS:
                continue
            if names:
                parts.append((coef, "*".join(names)))
            else:
                constant += coef
        if not parts:
            return constant
        sign = ""
        if all(coef < 0.0 for coef, _ in parts):  # emit the negated sum, return "-name"
            sign, constant = "-", -constant
            parts = [(-coef, product) for coef, product in parts]
        alias = len(parts) == 1 and parts[0][0] == 1.0 and parts[0][1].isidentifier()
        if alias and abs(constant) < _EPS:
            return sign + parts[0][1]  # reuse the name
        parts.sort(key=lambda part: part[0] < 0.0)  # a positive term first: no unary minus
        expression = ""
        for coef, product in parts:
            term = product if abs(coef) == 1.0 else f"{abs(coef)!r}*{product}"
            expression += f" {'-' if coef < 0.0 else '+'} {term}"
        if abs(constant) >= _EPS:
            expression += f" {'-' if constant < 0.0 else '+'} {abs(constant)!r}"
        return sign + self.assign(expression[3:])

    def assign(self, expression: str) -> str:
        """Emit ``v<n> = expression`` and return its name (an earlier one for a repeat).

        Reusing names is sound because the code is straight-line and assigns each name once.
        """
        name = self._known.get(expression)
        if name is None:
            self._count += 1
            name = self._known[expression] = f"v{self._count}"
            self.lines.append(f"    {name} = {expression}")
        return name
