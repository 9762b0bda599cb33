"""Fixtures shared by the study tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

PILOT = Path(__file__).resolve().parents[2] / "preregistration" / "hollow_copy_pilot.yaml"


@pytest.fixture
def study(tmp_path) -> Path:
    """A copy of the pilot's study document, to lock, sign and edit."""
    path = tmp_path / PILOT.name
    shutil.copyfile(PILOT, path)
    return path
