"""The package layout: every folder is installed, every exported name exists."""

import importlib
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import hilbot
from hilbot.driver.cli import COMMANDS, build_parser, main

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL = ("kinematics", "hal", "sim", "driver", "configs")


def _setup_packages() -> dict[str, str]:
    namespace = runpy.run_path(str(ROOT / "setup.py"), run_name="not_main")
    return dict(namespace["PACKAGES"])


def test_every_folder_with_init_is_a_listed_package():
    packages = _setup_packages()
    for top in ("kinematics", "hal", "sim", "driver", "configs"):
        for init in (ROOT / top).rglob("__init__.py"):
            folder = init.parent.relative_to(ROOT)
            name = "hilbot." + ".".join(folder.parts)
            assert packages.get(name) == folder.as_posix(), name


@pytest.mark.parametrize("name", sorted(_setup_packages()))
def test_every_package_imports_from_the_installed_tree(name):
    module = importlib.import_module(name)
    assert module.__file__ is not None
    assert "site-packages" not in module.__file__ or "hilbot" in module.__file__


@pytest.mark.parametrize("name", sorted(_setup_packages()))
def test_exported_members_exist(name):
    # httpx's test_exported_members: every name in __all__ is really there.
    module = importlib.import_module(name)
    for member in getattr(module, "__all__", ()):
        assert hasattr(module, member), f"{name}.__all__ names {member!r}, which does not exist"


def test_version_and_help():
    assert hilbot.__version__ != "0.0.0"
    out = subprocess.run(
        [sys.executable, "-m", "hilbot", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"hilbot {hilbot.__version__}"
    out = subprocess.run(
        [sys.executable, "-m", "hilbot", "--help"], capture_output=True, text=True, check=True
    )
    for command in COMMANDS:
        assert command in out.stdout


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "usage: hilbot" in capsys.readouterr().out


def test_every_command_module_has_the_interface():
    parser = build_parser(load="*")
    assert parser.prog == "hilbot"
    for module_name, _help in COMMANDS.values():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        assert callable(module.add_arguments)
        assert callable(module.run)


def test_layout_never_gives_a_second_copy_of_a_subpackage():
    # The root package lives in src/hilbot: a top-level hilbot/ would shadow the installed
    # one when running from the repository root. Tests are imported by importlib, without a
    # conftest at the root or __init__.py in tests/, so pytest never puts the repository root
    # on sys.path and `import driver` cannot give a second copy of hilbot.driver.
    assert (ROOT / "src" / "hilbot" / "__init__.py").is_file()
    assert not (ROOT / "hilbot").exists()
    assert not (ROOT / "conftest.py").exists()
    assert not list((ROOT / "tests").rglob("__init__.py"))
    assert (ROOT / "configs" / "__init__.py").is_file()  # importable as hilbot.configs
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert pytest_options["ini_options"]["testpaths"] == ["tests"]
    assert "--import-mode=importlib" in pytest_options["ini_options"]["addopts"]
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "build/" in ignored and "*.egg-info/" in ignored


def test_no_test_imported_a_top_level_folder_as_its_own_package():
    # Every test module is imported at collection, before this runs.
    assert [name for name in TOP_LEVEL if name in sys.modules] == []
