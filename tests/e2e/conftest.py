"""Shared fixtures for the tiers that drive the real binary."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEARTH_BIN", str(ROOT / "hearth"))
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def run_hearth(*args, timeout=120, **kw):
    """Run the hearth binary; returns CompletedProcess with text output."""
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kw)


@pytest.fixture
def hearth():
    return run_hearth


def pytest_terminal_summary(terminalreporter):
    path = os.environ.get("HEARTH_PYTEST_COUNTS")
    if not path:
        return
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    with open(path, "w") as f:
        f.write(f"{passed} {failed}\n")
