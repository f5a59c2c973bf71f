"""Generated kernels: chains and solver iterations written out as straight-line Python.

For one configuration of a small chain, numpy's per-call overhead (about a
microsecond per array operation) costs more than the arithmetic. So the hot
paths are generated once per chain as Python source, with the URDF's constants
folded in (zero terms dropped), and compiled with ``compile``/``exec``:

- ``program``: a chain compiled into constant transforms and elementary motions
  (the input of every generator), plus its vectorised numpy FK and Jacobian;
- ``emit``: the ``Emitter`` that writes sums of products with constant folding;
- ``chain_kernels``: ``Chain.fk``, ``fk_jacobian``, ``link_poses``, ``jacobian_at``;
- ``scalar_kernel``: the FK + Jacobian the IK solvers evaluate on Python floats;
- ``dls_step``: the damped least-squares step, an unrolled Cholesky solve;
- ``fused_step``: one whole DLS iteration (FK, Jacobian, error, step, box check);
- ``batch_kernel``: the batched FK + Jacobian on (B,) arrays for ``BatchSolver``.

The source holds only numbers from the URDF formatted with ``repr``, never user
text. This package is internal machinery (``Chain`` and the solvers are its
public face); docs/ik_kernels.md tells how it works and what it buys.
"""

from hilbot.kinematics.codegen.batch_kernel import BatchKernel
from hilbot.kinematics.codegen.chain_kernels import jacobian_kernel, pose_kernel
from hilbot.kinematics.codegen.dls_step import dls_step
from hilbot.kinematics.codegen.emit import Emitter
from hilbot.kinematics.codegen.fused_step import fused_step
from hilbot.kinematics.codegen.program import Program, compile_chain
from hilbot.kinematics.codegen.scalar_kernel import ScalarKernel

__all__ = [
    "BatchKernel",
    "Emitter",
    "Program",
    "ScalarKernel",
    "compile_chain",
    "dls_step",
    "fused_step",
    "jacobian_kernel",
    "pose_kernel",
]
