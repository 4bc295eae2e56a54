"""Shared test harness: backend/dtype/device parametrisation, the ``mps`` marker, hypothesis profiles.

Use the ``backend`` fixture (parametrised over ``torch``, ``emulator`` and — on a Mac — ``metal``)
in any op test: it selects the backend for the test body and gives the matching device via
``backend_device``::

    def test_something(backend, backend_device):
        A = torch.randn(4, 4, device=backend_device)
        ...

The emulator needs a C++ compiler (clang >= 17). Where none exists its tests skip with that reason,
except under CI (``CI`` set), where a missing compiler is a failure: CI installs one.
"""

from __future__ import annotations

import os

import pytest
import torch

try:
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=25, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", max_examples=10, deadline=None)
    settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))
except ImportError:  # hypothesis is in the test extra; tests that need it import it themselves
    pass

from helpers import MPS_REASON, require_emulator  # noqa: F401  (re-exported for fixtures)

from mpslinalg.kernels import mps_available, use_backend


def _backend_params() -> list:
    params = [pytest.param("torch", id="torch"), pytest.param("emulator", id="emulator")]
    params.append(pytest.param("metal", id="metal", marks=pytest.mark.mps))
    return params


@pytest.fixture(params=_backend_params())
def backend(request):
    """Run the test body with this backend selected; yields the backend name."""
    name = request.param
    if name == "emulator":
        require_emulator()
    with use_backend(name):
        yield name


@pytest.fixture(autouse=True)
def _front_doors_run_ours(request):
    """The public ops run mpslinalg's own implementation at every size (``routing.ours_always``):
    tests exercise the families' code, not the "never slower" table's torch.linalg calls. Tests of
    the table itself request the ``routing_table`` fixture."""
    if "routing_table" in request.fixturenames:
        yield
        return
    from mpslinalg import routing

    with routing.ours_always():
        yield


@pytest.fixture(autouse=True, scope="session")
def _routing_cache(tmp_path_factory):
    """No test reads a routing table calibrated on this machine, nor writes one into the real home
    (``python -m mpslinalg calibrate``'s cache, docs/calibrate.md): an empty cache of the session."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MPSLINALG_CACHE_DIR", str(tmp_path_factory.mktemp("mpslinalg-cache")))
    mp.delenv("MPSLINALG_ROUTING_TABLE", raising=False)
    from mpslinalg.oplayer import table

    table.forget()
    yield
    mp.undo()


@pytest.fixture
def routing_table():
    """Opt out of :func:`_front_doors_run_ours`: front doors consult ``mpslinalg.routing.WHEN``."""
    from mpslinalg.oplayer import table

    assert table._ours_depth == 0, "a test of the routing table runs inside ours_always()"


@pytest.fixture
def backend_device(backend) -> torch.device:
    """The device whose tensors the selected backend serves."""
    return torch.device("mps" if backend == "metal" else "cpu")


@pytest.fixture(params=[torch.float32, torch.complex64], ids=["float32", "complex64"])
def gpu_dtype(request) -> torch.dtype:
    """The dtypes every backend supports."""
    return request.param


def _second_shuffle(params: dict) -> bool:
    """Whether a test's parameters select helpers.ORDERS' second shuffled order (``"shuffle"``, seed 2)."""
    order = params.get("order")
    if isinstance(order, tuple):  # parametrize("order", ORDERS) or a fixture with params=ORDERS
        order, seed = order[0], order[1] if len(order) > 1 else None
    else:
        seed = params.get("seed")
    return order == "shuffle" and seed == 2


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the slow marks below must count there
def pytest_collection_modifyitems(config, items):
    # Triton's interpreter runs a check in a subprocess for 10-50 s (minutes on a loaded box): every
    # `*_interpreted` test is in the slow tier (README: the default command leaves it out, .ci/run
    # runs it after), without a decorator in each family's test files.
    # A kernel test runs in helpers.ORDERS: in order, reversed, and two shuffles. The default tier
    # keeps in order, reversed and the first shuffle (the three orders every kernel is tested in);
    # the second shuffle's seed is the slow tier's (a quarter of the kernel sweeps' time).
    slow = pytest.mark.slow
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item, "originalname", item.name).endswith("_interpreted") or _second_shuffle(params):
            item.add_marker(slow)
    skip_mps = pytest.mark.skip(reason=MPS_REASON)
    skip_cuda = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "mps" in item.keywords and not mps_available():
            item.add_marker(skip_mps)
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_cuda)
