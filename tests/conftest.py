import os
from pathlib import Path

import pytest
import torch

FIXTURE = Path(__file__).parent / "fixtures" / "libreoffice_small"
REPO = Path(__file__).resolve().parent.parent

torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    return FIXTURE
