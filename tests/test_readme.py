"""Every Python example in the README and the docs runs as written, outside the checkout.

A block whose first line is ``# needs: ...`` says what it needs that a test run does not
have (a servo on a port, a running ``hilbot run``, the output of a command shown before
it); it is checked to compile, not run.
"""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Every docs page: each of their blocks runs on its own, from an empty folder (shipped
#: robots come from ``hilbot.configs.ROBOTS_DIR``, never a path into the checkout).
DOCS = tuple(sorted(path.stem for path in (ROOT / "docs").glob("*.md")))
#: A fenced block: ```python (or ```py) up to the closing fence at the same indentation.
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?:python|py)[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
#: Guards against a hang only; an example that passes takes a few seconds.
TIMEOUT_S = 300


def python_blocks(text):
    """``(line number, source)`` of each Python block of a Markdown text."""
    return [
        (text.count("\n", 0, match.start()) + 1, textwrap.dedent(match["body"]))
        for match in FENCE.finditer(text)
    ]


README_BLOCKS = python_blocks(README.read_text(encoding="utf-8"))
BLOCKS = [
    (f"{path.relative_to(ROOT).as_posix()}:{line}", source)
    for path in [README, *(ROOT / "docs" / f"{name}.md" for name in DOCS)]
    for line, source in python_blocks(path.read_text(encoding="utf-8"))
]
#: A first line that says what the block needs beyond a checkout.
NEEDS = re.compile(r"\A# needs: ")


def test_the_readme_has_python_examples():
    assert len(README_BLOCKS) >= 2


def test_the_kinematics_and_ik_pages_are_checked():
    pages = {where.split(":")[0] for where, _ in BLOCKS}
    for page in ("kinematics", "ik", "ik_qp_multitask", "ik_batch"):
        assert f"docs/{page}.md" in pages


#: ``pip install 'hilbot[mujoco]'``: hilbot is not on PyPI, so that fails in a fresh venv.
FROM_PYPI = re.compile(r"""pip install\s+['"]?hilbot\[""")


def test_install_commands_are_written_as_they_work():
    texts = [README, *(ROOT / "docs").glob("*.md"), *(ROOT / "driver").rglob("*.py")]
    wrong = [str(p.relative_to(ROOT)) for p in texts if FROM_PYPI.search(p.read_text("utf-8"))]
    assert wrong == [], "write pip install '.[extra]' (from the clone): hilbot is not on PyPI"


def test_blocks_are_found_as_written():
    text = "a\n```python\nx = 1\n```\n\n- item\n\n  ```py\n  y = 2\n  ```\n```bash\nls\n```\n"
    assert python_blocks(text) == [(2, "x = 1\n"), (8, "y = 2\n")]


@pytest.mark.parametrize(("where", "source"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_the_example_runs_verbatim(where, source, tmp_path):
    if NEEDS.match(source):
        compile(source, where, "exec")  # a SyntaxError fails here
        pytest.skip(source.splitlines()[0])
    script = tmp_path / "example.py"
    script.write_text(source, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"
