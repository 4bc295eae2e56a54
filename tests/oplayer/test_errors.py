"""Shared input checks (mpslinalg/_errors.py): torch.linalg's conditions, clear messages."""

import pytest
import torch

from mpslinalg.oplayer import checks as E


def test_error_classes_catchable_both_ways():
    # torch.linalg raises RuntimeError; Python convention is ValueError/TypeError: we satisfy both.
    assert issubclass(E.ShapeError, RuntimeError) and issubclass(E.ShapeError, ValueError)
    assert issubclass(E.DTypeError, RuntimeError) and issubclass(E.DTypeError, TypeError)


def test_check_matrix_rank_and_square():
    with pytest.raises(E.ShapeError, match="op: A must have at least 2 dimensions, got shape \\(3,\\)"):
        E.check_matrix("op", "A", torch.zeros(3))
    with pytest.raises(E.ShapeError, match="square matrices, but they are 2 by 3"):
        E.check_matrix("op", "A", torch.zeros(4, 2, 3), square=True)
    A = torch.zeros(2, 3)
    assert E.check_matrix("op", "A", A) is A
    with pytest.raises(TypeError, match="expected A to be a torch.Tensor, got list"):
        E.check_matrix("op", "A", [[1.0]])


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float16, torch.bfloat16])
def test_rejects_integer_bool_half(dtype):
    with pytest.raises(E.DTypeError, match=f"floating point or complex.*got {dtype}"):
        E.check_matrix("op", "A", torch.zeros(2, 2, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
def test_accepts_cpu_dtypes(dtype):
    E.check_matrix("op", "A", torch.zeros(2, 2, dtype=dtype))


def test_float64_on_mps_is_rejected_clearly(monkeypatch):
    # An mps tensor cannot be made here; exercise the rule through a stand-in with device type mps.
    class FakeMps:
        dtype = torch.float64
        device = torch.device("mps")
        is_mps = True

    with pytest.raises(E.DTypeError, match="float64 on mps.*Apple GPUs have no float64"):
        E.check_dtype("op", "A", FakeMps())
    assert E.supported_dtypes("mps") == (torch.float32, torch.complex64)


def test_mixed_dtypes_raise_never_drop_imaginary_part():
    A = torch.eye(2)
    B = torch.ones(2, 1, dtype=torch.complex64)
    with pytest.raises(E.DTypeError, match="A and B to have the same dtype.*float32.*complex64"):
        E.check_same("op", ("A", "B"), A, B)


def test_mixed_devices():
    A = torch.eye(2)
    B = torch.ones(2, 1, device="meta")
    with pytest.raises(E.DeviceError, match="A is on cpu and B is on meta"):
        E.check_same("op", ("A", "B"), A, B)


def test_broadcast_batch():
    A, B = torch.zeros(3, 1, 2, 2), torch.zeros(5, 2, 4)
    assert E.broadcast_batch("op", ("A", "B"), A, B) == torch.Size([3, 5])
    with pytest.raises(E.ShapeError, match="incompatible batch dimensions of A \\(3, 2, 2\\), B \\(4, 2, 2\\)"):
        E.broadcast_batch("op", ("A", "B"), torch.zeros(3, 2, 2), torch.zeros(4, 2, 2))


def test_check_rhs():
    A = torch.zeros(3, 3)
    E.check_rhs("op", A, torch.zeros(3, 5))
    E.check_rhs("op", A, torch.zeros(5, 3), left=False)
    with pytest.raises(E.ShapeError, match="A X = B: B must have 3 rows, got 4"):
        E.check_rhs("op", A, torch.zeros(4, 5))
    with pytest.raises(E.ShapeError, match="X A = B: B must have 3 columns, got 5"):
        E.check_rhs("op", A, torch.zeros(3, 5), left=False)


def test_resolved_materialises_conj_and_strides():
    A = torch.randn(3, 4, dtype=torch.complex64)
    view = A.mT.conj()
    assert view.is_conj() and not view.is_contiguous()
    R = E.resolved(view)
    assert R.is_contiguous() and not R.is_conj()
    assert torch.equal(R, A.mT.conj().resolve_conj())
    # the input is untouched
    assert view.is_conj()


def test_raise_for_info_names_batch_element_and_passes_when_clean():
    E.raise_for_info("linalg.inv", torch.zeros(4, dtype=torch.int32), "pivot {info} is zero")
    E.raise_for_info("linalg.inv", torch.zeros(0, dtype=torch.int32), "pivot {info} is zero")
    info = torch.tensor([[0, 0], [0, 3]], dtype=torch.int32)
    with pytest.raises(torch.linalg.LinAlgError, match=r"linalg.inv: \(Batch element \(1, 1\)\): pivot 3 is zero"):
        E.raise_for_info("linalg.inv", info, "pivot {info} is zero")
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 2\): pivot 1"):
        E.raise_for_info("linalg.inv", torch.tensor([0, 0, 1, 2], dtype=torch.int32), "pivot {info}")
    with pytest.raises(torch.linalg.LinAlgError, match=r"^linalg.det: pivot 2$"):
        E.raise_for_info("linalg.det", torch.tensor(2, dtype=torch.int32), "pivot {info}")


def test_raise_for_info_leaves_fake_tensors_to_torchs_check():
    # a fake tensor has no value to read: torch < 2.13 runs a routed aten kernel on fake tensors with
    # torch.compiler.is_compiling() false (test_routing's compile test failed on torch 2.11 with a
    # data-dependent guard); torch's own check is the graph's, as under compile
    import importlib

    from torch._subclasses.fake_tensor import FakeTensorMode

    svd = importlib.import_module("mpslinalg.svd.api")
    lu_api = importlib.import_module("mpslinalg.lu.api")
    with FakeTensorMode():
        E.raise_for_info("linalg.inv", torch.zeros(4, dtype=torch.int32), "pivot {info} is zero")
        E.raise_for_info("linalg.det", torch.zeros((), dtype=torch.int32), "pivot {info} is zero")
        svd._raise(torch.zeros(3, dtype=torch.int32))  # the SVD's info (the det backward's, under AOT)
        lu_api._check_pivot_values("linalg.lu_solve", torch.ones(3, 4, dtype=torch.int32), 4)
    # the check is an op without outputs: torch.fx's dead-code elimination must keep it in a compiled
    # graph (torch < 2.13 dropped it: a singular batch returned inf instead of raising)
    assert torch.ops.aten._linalg_check_errors.default in torch.fx.node._side_effectful_functions
