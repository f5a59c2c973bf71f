"""Imports point one way: no circle among driver and sim modules, no test helper in production."""

import ast
from importlib import resources
from pathlib import Path

import pytest

PACKAGES = ("hilbot.driver", "hilbot.sim")


def modules(package):
    """``{module name: source path}`` of every module under ``package``."""
    root = Path(str(resources.files(package)))
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([package, *parts])] = path
    return found


def _type_checking_only(node):
    test = node.test
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def imported(path):
    """Modules ``path`` imports at run time, lazily inside functions too (not for typing only)."""
    names = set()
    pending = [ast.parse(path.read_text(encoding="utf-8"))]
    while pending:
        for child in ast.iter_child_nodes(pending.pop()):
            if isinstance(child, ast.If) and _type_checking_only(child):
                pending.extend(child.orelse)
                continue
            if isinstance(child, ast.Import):
                names.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                names.add(child.module)
                names.update(f"{child.module}.{alias.name}" for alias in child.names)
            pending.append(child)
    return names


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def graph():
    sources = {name: path for package in PACKAGES for name, path in modules(package).items()}
    return {name: (imported(path) & set(sources)) - {name} for name, path in sources.items()}


def test_the_driver_and_sim_modules_import_each_other_one_way(graph):
    assert cycles(graph) == []


def test_config_validation_and_chains_are_untied(graph):
    assert (
        "hilbot.driver.runtime.validation" in graph["hilbot.driver.runtime.config"]
    )  # load_config checks
    assert "hilbot.driver.runtime.config" not in graph["hilbot.driver.runtime.validation"]
    assert "hilbot.driver.runtime.config" not in graph["hilbot.driver.runtime.chains"]


def test_the_virtual_bus_runner_is_named_for_what_it_is(graph):
    assert "hilbot.sim.testing" not in graph  # the old name, for a module production used
    assert "hilbot.sim.virtual_bus" in graph["hilbot.sim"]


def test_the_finder_sees_lazy_imports():
    # load_config imports validation inside the function: the graph must count it.
    assert "hilbot.driver.runtime.validation" in imported(
        modules("hilbot.driver")["hilbot.driver.runtime.config"]
    )


def test_teleop_is_a_few_modules_by_concept():
    # Wire messages, the connection, worker isolation, the broker and the applications
    # around them: at most 12 modules, none of them one that only re-exports others.
    teleop = modules("hilbot.driver.teleop")
    del teleop["hilbot.driver.teleop"]
    assert len(teleop) <= 12, sorted(teleop)
    for name, path in teleop.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defines = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        assert any(isinstance(node, defines) for node in tree.body), f"{name} only re-exports"


def test_teleop_commands_are_not_imported_by_their_package(graph):
    # ``python -m`` imports the package first: a module it already holds would run twice.
    reached, pending = set(), ["hilbot.driver.teleop"]
    while pending:
        for nxt in graph[pending.pop()] - reached:
            reached.add(nxt)
            pending.append(nxt)
    commands = {"passwd", "schema", "worker"}
    assert not {f"hilbot.driver.teleop.{name}" for name in commands} & reached


#: The applications and the command line build on the runtime, never the other way round.
#: One arrow is left: the robot file's ``teleop`` section is the teleop package's settings.
APPLICATIONS = (
    "hilbot.driver.bench",
    "hilbot.driver.calibration",
    "hilbot.driver.commands",
    "hilbot.driver.cli",
    "hilbot.driver.dataset",
    "hilbot.driver.lead",
    "hilbot.driver.lerobot_bridge",
    "hilbot.driver.progress",
    "hilbot.driver.teleop",
    "hilbot.driver.view",
)
RUNTIME_MAY_IMPORT = {"hilbot.driver.teleop.settings", "hilbot.driver.teleop"}


def test_the_runtime_imports_no_application_nor_the_command_line(graph):
    runtime = {
        name: targets for name, targets in graph.items() if name.startswith("hilbot.driver.runtime")
    }
    assert len(runtime) > 10
    upward = {
        (name, target)
        for name, targets in runtime.items()
        for target in targets - RUNTIME_MAY_IMPORT
        if target.startswith(APPLICATIONS)
    }
    assert upward == set()
