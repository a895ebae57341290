from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
