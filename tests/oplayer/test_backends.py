"""Backend selection (DESIGN §4): which backend serves which device, and how a caller picks one."""

import pytest
import torch

import mpslinalg
from mpslinalg.kernels import BackendUnavailableError, backend_for, requested_backend, use_backend


def test_defaults(monkeypatch):
    monkeypatch.delenv("MPSLINALG_BACKEND", raising=False)
    assert requested_backend() == "auto"
    assert backend_for("cpu") == "torch"
    assert backend_for("cuda") == "torch"
    assert backend_for("mps") == "metal"


def test_env_var_selects_emulator_for_cpu(monkeypatch):
    monkeypatch.setenv("MPSLINALG_BACKEND", "emulator")
    assert backend_for(torch.device("cpu")) == "emulator"
    assert backend_for("cuda") == "emulator"
    with pytest.raises(BackendUnavailableError, match="emulator.*mps"):
        backend_for("mps")


def test_env_var_is_validated(monkeypatch):
    monkeypatch.setenv("MPSLINALG_BACKEND", "cuda-magic")
    with pytest.raises(ValueError, match="MPSLINALG_BACKEND.*cuda-magic"):
        backend_for("cpu")


def test_context_manager_overrides_env_and_restores(monkeypatch):
    monkeypatch.setenv("MPSLINALG_BACKEND", "emulator")
    with mpslinalg.use_backend("torch"):
        assert backend_for("cpu") == "torch"
        with use_backend("emulator"):
            assert backend_for("cpu") == "emulator"
        assert backend_for("cpu") == "torch"
    assert backend_for("cpu") == "emulator"


def test_context_manager_restores_after_exception(monkeypatch):
    monkeypatch.delenv("MPSLINALG_BACKEND", raising=False)
    with pytest.raises(KeyError):
        with use_backend("emulator"):
            raise KeyError
    assert backend_for("cpu") == "torch"


def test_metal_without_mps_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("MPSLINALG_BACKEND", raising=False)
    with use_backend("metal"):
        with pytest.raises(BackendUnavailableError, match="mps device.*cpu"):
            backend_for("cpu")


def test_unknown_backend_name():
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        with use_backend("gpu"):
            pass
