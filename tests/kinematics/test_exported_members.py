"""Every public package's ``__all__`` names what it has, and it has nothing public outside it.

In the style of httpx's ``tests/test_exported_members.py``: each name in ``__all__``
exists, and every public attribute is in ``__all__``, once. Submodules are
namespaces, not members: they count only where ``__all__`` lists them (``spatial``).
"""

from __future__ import annotations

import importlib
import types

import pytest

PACKAGES = [
    "hilbot.kinematics",
    "hilbot.kinematics.codegen",
    "hilbot.kinematics.ik",
    "hilbot.kinematics.ik.batch",
    "hilbot.kinematics.ik.core",
    "hilbot.kinematics.ik.dls",
    "hilbot.kinematics.ik.fabrik",
    "hilbot.kinematics.ik.limits",
    "hilbot.kinematics.ik.multitask",
    "hilbot.kinematics.ik.qp",
    "hilbot.kinematics.ik.qp.limits",
]


def _public_members(module: types.ModuleType) -> list[str]:
    exported = set(module.__all__)
    names = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        is_submodule = isinstance(value, types.ModuleType) and value.__name__.startswith(
            module.__name__ + "."
        )
        if is_submodule and name not in exported:
            continue
        names.append(name)
    # Names a package hands out on first use (PEP 562 ``__getattr__``): ``dls`` and ``qp``
    # still give the batched solvers that moved to ``ik.batch``, which imports them.
    lazy = vars(module).get("__getattr__")
    for name in exported - set(vars(module)) if lazy is not None else ():
        lazy(name)  # raises AttributeError for a name it does not have
        names.append(name)
    return names


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    missing = [member for member in module.__all__ if not hasattr(module, member)]
    assert missing == []


@pytest.mark.parametrize("name", PACKAGES)
def test_all_public_members_are_exported(name: str) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == sorted(_public_members(module))
    assert len(set(module.__all__)) == len(module.__all__)


def test_limits_keep_their_public_path() -> None:
    limits = importlib.import_module("hilbot.kinematics.ik.limits")
    home = importlib.import_module("hilbot.kinematics.ik.qp.limits")
    assert limits.__all__ == home.__all__
    for member in limits.__all__:
        assert getattr(limits, member) is getattr(home, member)


def test_the_ik_package_reexports_every_family() -> None:
    ik = importlib.import_module("hilbot.kinematics.ik")
    for family in ("core", "dls", "fabrik", "multitask", "qp"):
        sub = importlib.import_module(f"hilbot.kinematics.ik.{family}")
        for member in sub.__all__:
            if member in ik.__all__:
                assert getattr(ik, member) is getattr(sub, member), member
