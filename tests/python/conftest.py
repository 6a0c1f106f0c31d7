import pytest

import spillway


@pytest.fixture
def br(tmp_path):
    """A host-only resource (the tests run the same with and without a GPU)."""
    return spillway.BufferResource(use_gpu=False, spill_dir=str(tmp_path))
