"""The package: it imports, says what it is, and turns C++ errors into Python ones."""

import pytest

import spillway


def test_version_and_gpu():
    assert spillway.__version__.count(".") == 2
    assert isinstance(spillway.cuda_available(), bool)


def test_settings_are_the_registrys():
    s = spillway.settings()
    assert "SPILLWAY_HOST_LIMIT" in s and "SPILLWAY_COMM_TIMEOUT" in s
    assert all(k.startswith("SPILLWAY_") for k in s)


def test_buffer_resource_takes_the_settings_spellings(tmp_path):
    br = spillway.BufferResource(host_limit="64MiB", disk_limit=1 << 30, use_gpu=False,
                                 spill_dir=str(tmp_path))
    assert br.limit("HOST") == 64 << 20
    assert br.limit("DISK") == 1 << 30
    assert br.is_live("HOST") and not br.is_live("DEVICE")
    assert br.used("HOST") == 0
    assert "HOST" in br.usage()
    assert isinstance(br.statistics(), dict)
    assert "Statistics" in br.report()


@pytest.mark.parametrize("kwargs, cls", [
    ({"host_limit": "lots"}, spillway.UsageError),
    ({"host_limit": "-1GiB"}, spillway.UsageError),
])
def test_bad_limits_are_usage_errors_naming_the_argument(kwargs, cls):
    with pytest.raises(cls, match=list(kwargs)[0]):
        spillway.BufferResource(use_gpu=False, **kwargs)


def test_error_classes_are_also_the_builtin_kinds():
    assert issubclass(spillway.OutOfMemory, MemoryError)
    assert issubclass(spillway.IoError, OSError)
    assert issubclass(spillway.UsageError, ValueError)
    for cls in (spillway.OutOfMemory, spillway.CommError, spillway.IoError,
                spillway.CorruptDataError, spillway.CudaError, spillway.UsageError):
        assert issubclass(cls, spillway.SpillwayError)


def test_a_tier_that_does_not_exist_is_a_usage_error(br):
    with pytest.raises(spillway.UsageError):
        br.limit("GPU")
