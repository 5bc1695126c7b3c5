"""Shared fixtures of the Basalt test suite.

``path`` is a fresh database directory (not yet created); ``db`` is a
database opened there, closed at teardown whatever the test did to it.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

import basalt


@pytest.fixture
def path(tmp_path: pathlib.Path) -> pathlib.Path:
    """The directory of a database that does not exist yet."""
    return tmp_path / "db"


@pytest.fixture
def db(path: pathlib.Path) -> Iterator[basalt.Database]:
    """A fresh database in ``path``, closed after the test (closing twice is harmless)."""
    database = basalt.open(path)
    try:
        yield database
    finally:
        database.close()
