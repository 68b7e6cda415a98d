"""The house rules, checked as tests: lint clean, and no module too long to read."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINTED = ("brainmem_ros", "test", "scripts", "launch")
MAX_MODULE_LINES = 500


def test_flake8_and_docstring_checks_pass():
    """Run flake8 with the project's configuration (setup.cfg).

    pycodestyle, pyflakes, and pydocstyle with the rules ament_pep257 applies.
    """
    pytest.importorskip("flake8_docstrings", reason="flake8-docstrings is not installed (make env)")
    done = subprocess.run([sys.executable, "-m", "flake8", *LINTED], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"flake8 found:\n{done.stdout[-5000:]}{done.stderr[-2000:]}"


def test_no_module_of_the_package_is_over_the_limit():
    long = {str(p.relative_to(REPO)): n for p in (REPO / "brainmem_ros").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
