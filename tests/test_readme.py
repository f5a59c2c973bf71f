"""Every Python example in the README runs as written, from a folder that is not the checkout."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
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


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 2


def test_blocks_are_found_as_written():
    text = "a\n```python\nx = 1\n```\n\n- item\n\n  ```py\n  y = 2\n  ```\n```bash\nls\n```\n"
    assert python_blocks(text) == [(2, "x = 1\n"), (8, "y = 2\n")]


@pytest.mark.parametrize(("line", "source"), BLOCKS, ids=[f"README.md:{n}" for n, _ in BLOCKS])
def test_the_example_runs_verbatim(line, source, tmp_path):
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
    assert done.returncode == 0, f"README.md:{line} failed:\n{done.stderr[-3000:]}"
