"""The kinematics modules import one another one way: no cycle, not even a lazy one."""

from __future__ import annotations

import ast
from pathlib import Path

import hilbot.kinematics

ROOT = Path(hilbot.kinematics.__file__).resolve().parent
PREFIX = "hilbot.kinematics"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PREFIX, *parts))


def _graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its source."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def _cycle(graph: dict[str, set[str]], packages: bool) -> list[str] | None:
    """A cycle among modules (a package's ``__init__`` re-exports are left out unless asked)."""
    init = {m for m in graph if (ROOT / Path(*m.split(".")[2:]) / "__init__.py").exists()}
    nodes = {m: e if packages else e - init for m, e in graph.items() if packages or m not in init}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(nodes.get(m, ())):
            if state.get(n) == 1:
                return [*stack[stack.index(n) :], n]
            if n not in state and (found := visit(n)):
                return found
        state[m] = 2
        stack.pop()
        return None

    for m in sorted(nodes):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_graph_is_read() -> None:
    graph = _graph()
    assert "hilbot.kinematics.codegen.program" in graph["hilbot.kinematics.chain"]
    assert "hilbot.kinematics.chain" in graph["hilbot.kinematics.robot"]


def test_no_module_cycle() -> None:
    assert _cycle(_graph(), packages=False) is None


def test_chain_does_not_import_robot() -> None:
    assert "hilbot.kinematics.robot" not in _graph()["hilbot.kinematics.chain"]


def test_codegen_imports_no_solver() -> None:
    graph = _graph()
    for name, edges in graph.items():
        if name.startswith(f"{PREFIX}.codegen"):
            assert not {e for e in edges if e.startswith(f"{PREFIX}.ik")}, name


def _family(module: str) -> str:
    """``core``, ``dls``, ... for modules of ``hilbot.kinematics.ik.<family>``, else ``""``."""
    parts = module.split(".")
    return parts[3] if len(parts) > 4 and parts[2] == "ik" else ""


def test_solver_families_import_one_way() -> None:
    allowed = {
        "core": set(),
        "dls": {"core"},
        "qp": {"core"},
        "fabrik": {"core"},
        "multitask": {"core", "qp"},
        "batch": {"core", "dls", "qp"},  # the batched forms build on the single solvers
    }
    for name, edges in _graph().items():
        family = _family(name)
        if not family:
            continue
        used = {_family(e) for e in edges} - {"", family}
        assert used <= allowed[family], (name, used)


def test_the_batch_family_is_one_package() -> None:
    """Every batched module lives in ``ik.batch``, and no other family imports it."""
    graph = _graph()
    batch = {m for m in graph if _family(m) == "batch"}
    assert {f"{PREFIX}.ik.batch.dls_solver", f"{PREFIX}.ik.batch.qp_solver"} <= batch
    assert f"{PREFIX}.ik.batch.solve_ik" in batch
    for name in graph:
        leaf = name.rsplit(".", 1)[-1]
        if _family(name) not in ("", "batch"):
            assert not leaf.startswith("batch"), f"{name}: batched code belongs in ik.batch"
    for name, edges in graph.items():
        if _family(name) not in ("", "batch"):
            assert not {e for e in edges if _family(e) == "batch"}, name


def test_the_batch_names_stay_importable_where_they_were() -> None:
    from hilbot.kinematics import ik
    from hilbot.kinematics.ik import batch, dls, qp

    for name in batch.__all__:
        assert getattr(ik, name) is getattr(batch, name), name
    assert dls.BatchSolver is batch.BatchSolver and dls.BatchResult is batch.BatchResult
    for name in ("QPBatchSolver", "QPBatchResult", "solve_ik", "Configuration", "FrameTargets"):
        assert getattr(qp, name) is getattr(batch, name), name
