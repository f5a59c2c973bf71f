"""The HAL's layout: one engine under the families, imports one way, no re-export module."""

import ast

from tests.test_import_graph import cycles, imported, modules

FAMILIES = ("hilbot.hal.dynamixel", "hilbot.hal.feetech")


def _graph():
    # a package's __init__ is its public face: it imports its modules, and they it
    sources = {n: p for n, p in modules("hilbot.hal").items() if p.name != "__init__.py"}
    return {name: (imported(path) & set(sources)) - {name} for name, path in sources.items()}


def test_hal_modules_import_each_other_one_way():
    assert cycles(_graph()) == []


def test_the_engine_knows_no_family():
    # hal/bus/ is the engine every family runs on: a family may import it, not the reverse.
    for name, imports in _graph().items():
        if name.startswith("hilbot.hal.bus"):
            assert not [i for i in imports if i.startswith(FAMILIES)], name


def test_every_module_defines_something_and_the_folders_stay_small():
    found = modules("hilbot.hal")
    for name, path in found.items():
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defines = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        assert any(isinstance(node, defines) for node in tree.body), f"{name} only re-exports"
    for folder in ("hilbot.hal.bus", *FAMILIES):
        inside = [n for n in found if n.startswith(folder + ".")]
        assert len(inside) <= 10, sorted(inside)
