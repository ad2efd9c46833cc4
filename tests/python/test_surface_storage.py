"""Typed and untyped storages, TensorType, the onnx enums, symeig, strata.classes, mobile_optimizer and the
randomized svd_lowrank / pca_lowrank, against torch 2.13."""

import pickle

import pytest

import strata

torch = pytest.importorskip("torch")


def _same(fn):
    """fn(lib) -> a value (or the exception type name), equal for strata and torch."""
    def run(lib):
        try:
            return fn(lib)
        except Exception as e:  # noqa: BLE001
            return type(e).__name__
    ours, ref = run(strata), run(torch)
    assert ours == ref, (ours, ref)


@pytest.mark.parametrize("fn", [
    lambda lib: (lib.FloatStorage(3).size(), str(lib.FloatStorage(3).dtype)[-7:]),  # torch's is uninitialised
    lambda lib: lib.FloatStorage([1, 2.5, 3]).tolist(),
    lambda lib: lib.ByteStorage([1, 2, 255]).tolist(),
    lambda lib: (lib.LongStorage([1, 2, 3]).tolist(), lib.LongStorage([1, 2, 3]).nbytes()),
    lambda lib: lib.IntStorage([1, 2]).float().tolist(),
    lambda lib: lib.DoubleStorage([1.5, 2]).long().tolist(),
    lambda lib: lib.TypedStorage(3, dtype=lib.float64).size(),
    lambda lib: lib.TypedStorage([1, 2], dtype=lib.int32).tolist(),
    lambda lib: lib.UntypedStorage(4).nbytes(),
    lambda lib: lib.UntypedStorage([1, 2, 3]).tolist(),
    lambda lib: lib.arange(2, dtype=lib.int16).untyped_storage().tolist(),
    lambda lib: lib.TypedStorage(wrap_storage=lib.arange(3, dtype=lib.float32).untyped_storage(),
                                 dtype=lib.int32).tolist(),
    lambda lib: lib.FloatStorage(3).fill_(2).tolist(),
    lambda lib: lib.FloatStorage(2).copy_(lib.FloatStorage([3, 4])).tolist(),
    lambda lib: lib.FloatStorage([1, 2]).clone().tolist(),
    lambda lib: list(lib.FloatStorage([1, 2])),
    lambda lib: lib.FloatStorage([1, 2, 3])[1:],
    lambda lib: lib.FloatStorage([1, 2, 3])[5],
    lambda lib: lib.ByteStorage.from_buffer(b"abc").tolist(),
    lambda lib: lib.FloatStorage(2).type(),
    lambda lib: lib.FloatStorage(2).is_shared(),
    lambda lib: pickle.loads(pickle.dumps(lib.FloatStorage([1, 2]))).tolist(),
    lambda lib: lib.tensor([], dtype=lib.float32).set_(lib.FloatStorage([1, 2])).tolist(),
])
def test_storages_match_torch(fn):
    _same(fn)


def test_tensor_storage_shares_memory():
    for lib in (strata, torch):
        x = lib.arange(6, dtype=lib.float32)
        s = x.storage()
        assert isinstance(s, lib.TypedStorage) and isinstance(s, lib.FloatStorage)
        assert not isinstance(s, lib.DoubleStorage) and isinstance(s, lib.storage.TypedStorage)
        assert (s.size(), len(s), s.nbytes(), s.element_size()) == (6, 6, 24, 4)
        assert s.data_ptr() == x.data_ptr() and s.tolist() == x.tolist() and s[2] == 2.0
        u = x.untyped_storage()
        assert isinstance(u, lib.UntypedStorage) and u.nbytes() == 24 and u.data_ptr() == x.data_ptr()
        assert isinstance(s.untyped(), lib.UntypedStorage) and s.untyped().data_ptr() == u.data_ptr()
        s[0] = 42.0
        assert x[0].item() == 42.0
        for i in range(4, 8):  # the bytes of x[1]
            u[i] = 0
        assert x[1].item() == 0.0
        x[3] = 7
        assert s[3] == 7.0


def test_storage_errors_are_clear():
    with pytest.raises(RuntimeError, match="non-negative"):
        strata.FloatStorage(-1)
    with pytest.raises(TypeError, match="size or a sequence"):
        strata.TypedStorage(object(), dtype=strata.float32)
    with pytest.raises(RuntimeError, match="sizes do not match"):
        strata.FloatStorage(2).copy_(strata.FloatStorage(3))
    with pytest.raises(RuntimeError, match=r"\[0, 255\]"):
        strata.UntypedStorage([1, 300])
    with pytest.raises(RuntimeError, match="dtype"):
        strata.tensor([], dtype=strata.float64).set_(strata.FloatStorage([1, 2]))


def test_tensor_type_and_onnx_enums():
    assert str(strata.TensorType.get()) == str(torch.TensorType.get()) == "Tensor"
    t = strata.TensorType.create_from_tensor(strata.ones(2, 3))
    assert t.sizes() == [2, 3] and t.scalarType() == "Float" and t.dim() == 2
    for name in ("OperatorExportTypes", "TrainingMode"):
        ours, ref = getattr(strata.onnx, name), getattr(torch.onnx, name)
        assert list(ours.__members__) == list(ref.__members__)
        assert [int(m) for m in ours] == [int(ref.__members__[k]) for k in ours.__members__]


def test_onnx_export_accepts_the_enums(tmp_path):
    pytest.importorskip("onnx")
    m = strata.nn.Linear(3, 2)
    proto = strata.onnx.export(m, (strata.ones(1, 3),), None, training=strata.onnx.TrainingMode.EVAL,
                               operator_export_type=strata.onnx.OperatorExportTypes.ONNX)
    assert proto.graph.node
    with pytest.raises(strata.onnx.OnnxExporterError, match="ONNX_ATEN"):
        strata.onnx.export(m, (strata.ones(1, 3),), None,
                           operator_export_type=strata.onnx.OperatorExportTypes.ONNX_ATEN)


def test_symeig_is_removed_as_in_torch():
    for lib in (strata, torch):
        with pytest.raises(RuntimeError, match="deprecated since version 1.9 and is now removed"):
            lib.symeig(lib.eye(2))
        with pytest.raises(RuntimeError, match="linalg.eigh"):
            lib.eye(2).symeig()


def test_classes_and_mobile_optimizer():
    with pytest.raises(OSError, match="Could not load this library"):
        strata.classes.load_library("/nonexistent/libnothing.so")
    assert strata.classes.loaded_libraries == set()
    with pytest.raises(RuntimeError, match="does not exist"):
        strata.classes.myns.MyClass
    from strata.utils.mobile_optimizer import optimize_for_mobile
    with pytest.raises(NotImplementedError, match="TorchScript"):
        optimize_for_mobile(strata.nn.Linear(2, 2))


@pytest.mark.parametrize("shape,rank", [((30, 20), 4), ((12, 40), 3), ((2, 25, 15), 5)])
def test_svd_lowrank_recovers_low_rank_matrices(shape, rank):
    strata.manual_seed(0)
    *batch, m, n = shape
    a = strata.randn(*batch, m, rank, dtype=strata.float64) @ strata.randn(*batch, rank, n, dtype=strata.float64)
    u, s, v = strata.svd_lowrank(a, q=rank + 2)
    assert tuple(u.shape) == (*batch, m, rank + 2) and tuple(v.shape) == (*batch, n, rank + 2)
    exact = strata.linalg.svdvals(a)[..., :rank + 2]
    assert strata.allclose(s, exact, atol=1e-8)
    assert strata.allclose(u @ strata.diag_embed(s) @ v.mT, a, atol=1e-8)
    assert strata.allclose(u.mT @ u, strata.eye(rank + 2, dtype=strata.float64), atol=1e-10)


def test_svd_lowrank_full_rank_is_close_and_m_is_subtracted():
    strata.manual_seed(1)
    # fast-decaying spectrum: the top singular values are found to good accuracy
    u0 = strata.linalg.qr(strata.randn(40, 40, dtype=strata.float64)).Q
    v0 = strata.linalg.qr(strata.randn(30, 30, dtype=strata.float64)).Q
    sv = strata.tensor([2.0 ** -i for i in range(30)], dtype=strata.float64)
    a = u0[:, :30] @ strata.diag(sv) @ v0.mT
    _, s, _ = strata.svd_lowrank(a, q=8, niter=4)
    assert strata.allclose(s[:5], sv[:5], rtol=1e-6)
    m = strata.ones(40, 30, dtype=strata.float64)
    _, s2, _ = strata.svd_lowrank(a + m, q=8, niter=4, M=m)
    assert strata.allclose(s2[:5], sv[:5], rtol=1e-6)


def test_pca_lowrank_matches_svd_of_centered_data_and_torch():
    strata.manual_seed(2)
    a = strata.randn(50, 3, dtype=strata.float64) @ strata.randn(3, 8, dtype=strata.float64) + 5.0
    u, s, v = strata.pca_lowrank(a, q=3)
    exact = strata.linalg.svdvals(a - a.mean(0, keepdim=True))[:3]
    assert strata.allclose(s, exact, atol=1e-8)
    ref = torch.pca_lowrank(torch.tensor(a.tolist(), dtype=torch.float64), q=3)[1]
    assert s.tolist() == pytest.approx(ref.tolist(), abs=1e-8)
    # principal directions agree up to sign
    tv = torch.linalg.svd(torch.tensor((a - a.mean(0, keepdim=True)).tolist(), dtype=torch.float64)).Vh[:3].T
    assert strata.tensor(tv.abs().tolist(), dtype=strata.float64).sub(v.abs()).abs().max().item() < 1e-6


def test_lowrank_errors():
    with pytest.raises(ValueError, match="q=9"):
        strata.svd_lowrank(strata.ones(5, 8), q=9)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        strata.pca_lowrank(strata.ones(5))
    with pytest.raises(TypeError, match="Tensor"):
        strata.svd_lowrank([[1.0]])
