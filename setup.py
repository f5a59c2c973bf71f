"""Map the repository's top-level folders onto the ``hilbot`` package tree.

The folders ``kinematics/ hal/ sim/ driver/ configs/`` stay at the repository
root and become ``hilbot.kinematics`` and so on. Every nested package must be
listed for setuptools (editable installs hide a missing one), so the list is
generated from the folders that hold an ``__init__.py``.
"""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
TOP_LEVEL = ("kinematics", "hal", "sim", "driver", "configs")


def package_map() -> dict[str, str]:
    """Return ``{package name: folder}`` for the root package and every subpackage."""
    mapping = {"hilbot": "src/hilbot"}
    for top in TOP_LEVEL:
        for init in sorted((ROOT / top).rglob("__init__.py")):
            folder = init.parent.relative_to(ROOT)
            if "__pycache__" in folder.parts:
                continue
            mapping["hilbot." + ".".join(folder.parts)] = folder.as_posix()
    return mapping


PACKAGES = package_map()

if __name__ == "__main__":
    setup(
        packages=list(PACKAGES),
        package_dir=PACKAGES,
        include_package_data=True,
        package_data={
            "hilbot": ["py.typed"],
            "hilbot.configs": ["**/*.yaml", "**/*.urdf", "**/*.json", "**/*.csv"],
            "hilbot.driver.teleop": ["schema/*.json"],
        },
    )
