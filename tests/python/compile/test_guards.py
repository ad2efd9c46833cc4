"""strata._C._guards: every guard kind passes where it should and fails where it should, the
shared-prefix fast path agrees with the one-guard-at-a-time evaluation, check_verbose words the
first miss, and check() never raises."""
import pytest

import strata
import strata.nn as nn
from strata._C import _guards

ARG0 = [("arg", 0)]
ARG1 = [("arg", 1)]


def outcome(gs, args, globals_=None, closure=None):
    """check(), cross-checked against the unshared evaluation and check_verbose."""
    globals_ = {} if globals_ is None else globals_
    fast = gs.check(args, globals_, closure)
    assert gs._check_unshared(args, globals_, closure) == fast
    msg = gs.check_verbose(args, globals_, closure)
    assert (msg is None) == fast, msg
    return fast


def why(gs, args, globals_=None, closure=None):
    return gs.check_verbose(args, {} if globals_ is None else globals_, closure)


def tensor_set(**kw):
    gs = _guards.GuardSet(["x"])
    spec = dict(dtype=strata.float32, device="cpu", requires_grad=False, sizes=[4, 3], strides=None)
    spec.update(kw)
    gs.add_tensor(ARG0, **spec)
    return gs


# ---------------------------------------------------------------------------- tensors

def test_tensor_dtype_device_requires_grad():
    gs = tensor_set()
    x = strata.randn(4, 3)
    assert outcome(gs, (x,))
    assert not outcome(gs, (x.double(),))
    assert why(gs, (x.double(),)) == "L['x'].dtype: expected float32, got float64"
    assert not outcome(gs, (strata.randn(4, 3, device="meta"),))
    assert why(gs, (strata.randn(4, 3, device="meta"),)) == "L['x'].device: expected cpu, got meta"
    r = strata.randn(4, 3).requires_grad_()
    assert not outcome(gs, (r,))
    assert why(gs, (r,)) == "L['x'].requires_grad: expected False, got True"
    # requires_grad through a grad_fn counts too
    assert not outcome(gs, (r * 2,))
    assert outcome(tensor_set(requires_grad=True), (r * 2,))


def test_tensor_sizes_ndim_and_dynamic_dims():
    gs = tensor_set()
    assert not outcome(gs, (strata.randn(8, 3),))
    assert why(gs, (strata.randn(8, 3),)) == "L['x'].size()[0] == 4 (got 8)"
    assert not outcome(gs, (strata.randn(4, 3, 1),))
    assert why(gs, (strata.randn(4, 3, 1),)) == "L['x'].dim() == 2 (got 3)"
    dyn = tensor_set(sizes=[None, 3])
    assert outcome(dyn, (strata.randn(8, 3),))
    assert outcome(dyn, (strata.randn(1, 3),))
    assert not outcome(dyn, (strata.randn(8, 4),))
    assert not outcome(dyn, (strata.randn(3),))


def test_tensor_strides():
    gs = tensor_set(sizes=[4, 3], strides=[3, 1])
    assert outcome(gs, (strata.randn(4, 3),))
    t = strata.randn(3, 4).t()  # sizes [4, 3], strides [1, 4]
    assert not outcome(gs, (t,))
    assert why(gs, (t,)) == "L['x'].stride()[0] == 3 (got 1)"
    assert outcome(tensor_set(sizes=[4, 3], strides=None), (t,))  # strides not guarded
    assert outcome(tensor_set(sizes=[4, 3], strides=[None, 4]), (t,))
    with pytest.raises(ValueError):
        tensor_set(sizes=[4, 3], strides=[1])


def test_tensor_type_and_subclass():
    gs = tensor_set(sizes=[4, 3], requires_grad=True)
    p = nn.Parameter(strata.randn(4, 3))
    assert outcome(gs, (p,))
    assert not outcome(gs, ([1.0],))
    assert why(gs, (3,)) == "L['x']: expected a Tensor, got int"
    assert not outcome(gs, (None,))


# ---------------------------------------------------------------------------- type / id / equals

def test_type_is_exact():
    gs = _guards.GuardSet(["x"])
    gs.add_type(ARG0, strata.Tensor)
    assert outcome(gs, (strata.randn(2),))
    assert not outcome(gs, (nn.Parameter(strata.randn(2)),))
    assert why(gs, (nn.Parameter(strata.randn(2)),)) == "type(L['x']) is Tensor (got Parameter)"
    with pytest.raises(TypeError):
        gs.add_type(ARG0, 3)


def test_id_keeps_object_alive():
    import gc
    import weakref

    class Obj:
        pass

    o = Obj()
    ref = weakref.ref(o)
    gs = _guards.GuardSet(["m"])
    gs.add_id(ARG0, o)
    assert outcome(gs, (o,))
    assert not outcome(gs, (Obj(),))
    assert "id(L['m']) ==" in why(gs, (Obj(),))
    del o
    gc.collect()
    assert ref() is not None  # the guard holds it, so its id cannot be reused
    del gs
    gc.collect()
    assert ref() is None


def test_guardset_cycle_is_collected():
    import gc
    import weakref

    class Holder:
        pass

    h = Holder()
    gs = _guards.GuardSet(["h"])
    gs.add_id(ARG0, h)
    h.guards = gs  # h -> gs -> h
    ref = weakref.ref(h)
    del h, gs
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("expected,same,different", [
    (True, True, [1, False, 1.0, None]),
    (1, 1, [True, 1.0, 2, "1"]),
    (1.0, 1.0, [1, -0.0 + 2, 2.0, True]),
    (0.0, 0.0, [-0.0, 0]),
    (float("nan"), float("nan"), [1.0]),
    ("relu", "relu", ["gelu", b"relu"]),
    (None, None, [0, False, ""]),
    ((1, "a", (2.0, None)), (1, "a", (2.0, None)), [(1, "a", (2, None)), (1, "a"), [1, "a", (2.0, None)]]),
    (strata.float32, strata.float32, [strata.float64, "float32"]),
    (strata.device("cpu"), strata.device("cpu"), [strata.device("meta"), "cpu"]),
])
def test_equals(expected, same, different):
    gs = _guards.GuardSet(["v"])
    gs.add_equals(ARG0, expected)
    assert outcome(gs, (same,))
    for d in different:
        assert not outcome(gs, (d,)), d


def test_equals_messages_and_rejects_mutables():
    gs = _guards.GuardSet(["flag"])
    gs.add_equals(ARG0, True)
    assert gs.describe() == ["L['flag'] == True"]
    assert why(gs, (1,)) == "L['flag'] == True (got 1 of type int)"
    assert why(gs, (False,)) == "L['flag'] == True (got False)"
    for bad in ([1], {"a": 1}, {1}, object()):
        with pytest.raises(TypeError):
            gs.add_equals(ARG0, bad)


# ---------------------------------------------------------------------------- containers

def test_len_and_items():
    gs = _guards.GuardSet(["xs"])
    gs.add_len(ARG0, 2)
    gs.add_equals([("arg", 0), ("item", 1)], "b")
    gs.add_equals([("arg", 0), ("item", -2)], "a")
    assert outcome(gs, (["a", "b"],))
    assert outcome(gs, (("a", "b"),))
    assert not outcome(gs, (["a", "b", "c"],))
    assert why(gs, (["a", "b", "c"],)) == "len(L['xs']) == 2 (got 3)"
    assert not outcome(gs, (["a"],))
    assert not outcome(gs, (5,))  # no len(), no items
    d = _guards.GuardSet(["d"])
    d.add_len(ARG0, 1)
    d.add_equals([("arg", 0), ("item", "k")], 3)
    d.add_equals([("arg", 0), ("item", 7)], 4)
    assert not outcome(d, ({"k": 3},))
    assert outcome(_only_item("k", 3), ({"k": 3},))
    assert not outcome(_only_item("k", 3), ({"j": 3},))
    assert why(_only_item("k", 3), ({"j": 3},)) == "L['d']['k']: missing (for L['d']['k'] == 3)"


def _only_item(key, value):
    gs = _guards.GuardSet(["d"])
    gs.add_equals([("arg", 0), ("item", key)], value)
    return gs


def test_item_on_defaultdict_does_not_insert():
    from collections import defaultdict
    dd = defaultdict(int)
    gs = _only_item("k", 0)
    assert not outcome(gs, (dd,))
    assert "k" not in dd


def test_dict_keys_in_order():
    gs = _guards.GuardSet(["kwargs"])
    gs.add_dict_keys(ARG0, ["a", "b"])
    assert outcome(gs, ({"a": 1, "b": 2},))
    assert not outcome(gs, ({"b": 2, "a": 1},))
    assert why(gs, ({"b": 2, "a": 1},)) == "list(L['kwargs'].keys()) == ['a', 'b'] (got ['b', 'a'])"
    assert not outcome(gs, ({"a": 1},))
    assert not outcome(gs, ({"a": 1, "b": 2, "c": 3},))
    assert not outcome(gs, ([("a", 1), ("b", 2)],))
    with pytest.raises(TypeError):
        gs.add_dict_keys(ARG0, [object()])
    ints = _guards.GuardSet(["d"])
    ints.add_dict_keys(ARG0, [1, (2, "x")])
    assert outcome(ints, ({1: 0, (2, "x"): 0},))
    assert not outcome(ints, ({True: 0, (2, "x"): 0},))  # True is not 1


def test_none_guards():
    gs = _guards.GuardSet(["a", "b"])
    gs.add_is_none(ARG0)
    gs.add_not_none(ARG1)
    assert outcome(gs, (None, 0))
    assert not outcome(gs, (0, 0))
    assert why(gs, (0, 0)) == "L['a'] is None (got a int)"
    assert not outcome(gs, (None, None))
    assert why(gs, (None, None)) == "L['b'] is not None (got None)"


# ---------------------------------------------------------------------------- roots

def test_globals_missing_is_a_miss():
    gs = _guards.GuardSet([])
    gs.add_equals([("global", "scale")], 2)
    assert outcome(gs, (), {"scale": 2})
    assert not outcome(gs, (), {"scale": 3})
    assert not outcome(gs, (), {})
    assert why(gs, (), {}) == "G['scale']: missing (for G['scale'] == 2)"


def test_closure_cells():
    def make():
        k = 3
        t = strata.randn(2)

        def f():
            return k, t
        return f

    f = make()
    gs = _guards.GuardSet([], closure_names=list(f.__code__.co_freevars))
    gs.add_equals([("closure", 0)], 3)
    gs.add_tensor([("closure", 1)], strata.float32, "cpu", False, [2])
    assert gs.describe()[0] == "L['k'] == 3"
    assert outcome(gs, (), {}, f.__closure__)
    import types
    empty = types.CellType()
    assert not outcome(gs, (), {}, (empty, f.__closure__[1]))
    assert not outcome(gs, (), {}, None)
    assert not outcome(gs, (), {}, (types.CellType(4), f.__closure__[1]))
    assert why(gs, (), {}, (types.CellType(4), f.__closure__[1])) == "L['k'] == 3 (got 4)"


def test_arg_out_of_range_and_bad_context():
    gs = _guards.GuardSet(["x"])
    gs.add_not_none([("arg", 3)])
    assert not outcome(gs, (1,))
    assert gs.check([1, 2, 3, 4], {}) is False  # args not a tuple: a miss, not an error
    assert gs.check((1, 2, 3, 4), None) is True  # no globals needed
    g = _guards.GuardSet([])
    g.add_not_none([("global", "a")])
    assert not outcome(g, (), None)
    assert g.check((), None) is False
    assert g.check_verbose((), None) == "G['a']: missing (for G['a'] is not None)"
    assert g.check((), 5) is False


# ---------------------------------------------------------------------------- modules

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(3, 4)
        self.layer2 = nn.Linear(4, 2)


def module_guards(m):
    gs = _guards.GuardSet(["self"])
    self_ = [("arg", 0)]
    gs.add_type(self_, type(m))
    gs.add_equals(self_ + [("attr", "training")], m.training)
    gs.add_dict_keys(self_ + [("attr", "_modules")], list(m._modules))
    for name, sub in m._modules.items():
        path = self_ + [("attr", "_modules"), ("dict_item", name)]
        gs.add_id(path, sub)
        for pname, p in sub._parameters.items():
            gs.add_tensor(path + [("attr", "_parameters"), ("dict_item", pname)], p.dtype, "cpu", p.requires_grad,
                          list(p.shape), list(p.stride()))
    return gs


def test_module_attr_chains():
    m = Block()
    gs = module_guards(m)
    assert outcome(gs, (m,))
    # shared prefixes: self, training, _modules, 2 submodules, 2 _parameters, 4 parameters
    assert gs._num_nodes == 11
    m.eval()
    assert not outcome(gs, (m,))
    assert why(gs, (m,)) == "L['self'].training == True (got False)"
    m.train()
    assert outcome(gs, (m,))
    m.layer1 = nn.Linear(3, 4)
    assert not outcome(gs, (m,))
    assert why(gs, (m,)).startswith("id(L['self']._modules['layer1']) ==")
    gs = module_guards(m)
    m.layer1.weight.requires_grad_(False)
    assert not outcome(gs, (m,))
    assert why(gs, (m,)) == "L['self']._modules['layer1']._parameters['weight'].requires_grad: expected True, got False"


def test_dict_item_on_namespaces():
    import types
    mod = types.ModuleType("cfg")
    mod.depth = 2

    class Obj:
        pass

    o = Obj()
    o.depth = 2
    gs = _guards.GuardSet(["c"])
    gs.add_equals([("arg", 0), ("dict_item", "depth")], 2)
    assert outcome(gs, (mod,))
    assert outcome(gs, (o,))
    assert outcome(gs, ({"depth": 2},))
    assert not outcome(gs, (3,))  # no __dict__
    mod.depth = 3
    assert not outcome(gs, (mod,))


def test_property_that_raises_is_a_miss():
    class Weird:
        @property
        def value(self):
            raise RuntimeError("boom")

        def __eq__(self, other):
            raise RuntimeError("eq")

    gs = _guards.GuardSet(["w"])
    gs.add_equals([("arg", 0), ("attr", "value")], 1)
    assert gs.check((Weird(),), {}) is False
    assert gs._check_unshared((Weird(),), {}) is False
    msg = gs.check_verbose((Weird(),), {})
    assert msg == "L['w'].value: RuntimeError: RuntimeError('boom') (for L['w'].value == 1)"
    missing = _guards.GuardSet(["w"])
    missing.add_not_none([("arg", 0), ("attr", "nope")])
    assert not outcome(missing, (Weird(),))
    assert "AttributeError" in why(missing, (Weird(),))
    # a failing len() and a raising __eq__ on a type the guard does not know
    ln = _guards.GuardSet(["w"])
    ln.add_len(ARG0, 1)
    assert not outcome(ln, (Weird(),))


def test_cannot_add_while_checking():
    gs = _guards.GuardSet(["w"])

    class Sneaky:
        @property
        def value(self):
            gs.add_is_none(ARG0)
            return 1

    gs.add_equals([("arg", 0), ("attr", "value")], 1)
    assert gs.check((Sneaky(),), {}) is False  # the getter's add raised: a miss
    assert len(gs) == 1


# ---------------------------------------------------------------------------- shapes and aliasing

def test_dim_relations():
    gs = _guards.GuardSet(["x", "y"])
    x0 = ("size", ARG0, 0)
    gs.add_dim_relation(x0, ">=", 2)
    gs.add_dim_relation(("size", ARG1, 1), "==", ("mul", 4, x0))
    gs.add_dim_relation(("floordiv", ("sub", ("size", ARG1, -1), 1), 2), "<", ("add", x0, 10))
    assert gs.describe() == ["L['x'].size()[0] >= 2", "L['y'].size()[1] == 4*L['x'].size()[0]",
                             "(L['y'].size()[-1] - 1)//2 < L['x'].size()[0] + 10"]
    assert outcome(gs, (strata.randn(3, 5), strata.randn(1, 12)))
    assert not outcome(gs, (strata.randn(1, 5), strata.randn(1, 4)))
    assert why(gs, (strata.randn(1, 5), strata.randn(1, 4))) == "L['x'].size()[0] >= 2 (got 1 >= 2)"
    assert not outcome(gs, (strata.randn(3), strata.randn(1, 13)))
    assert why(gs, (strata.randn(3), strata.randn(1, 13))) == "L['y'].size()[1] == 4*L['x'].size()[0] (got 13 == 12)"
    assert not outcome(gs, (strata.randn(3), 5))  # not a tensor
    assert not outcome(gs, (strata.randn(3), strata.randn(12)))  # dimension out of range
    with pytest.raises(ValueError):
        gs.add_dim_relation(x0, "=", 2)
    with pytest.raises(ValueError):
        gs.add_dim_relation(("pow", x0, 2), "==", 4)


def test_floordiv_is_python_floor_and_zero_division_fails():
    gs = _guards.GuardSet(["x"])
    gs.add_dim_relation(("floordiv", ("sub", 0, ("size", ARG0, 0)), 2), "==", -2)  # -3 // 2 == -2
    assert outcome(gs, (strata.randn(3),))
    z = _guards.GuardSet(["x"])
    z.add_dim_relation(("floordiv", 4, ("size", ARG0, 0)), "==", 0)
    assert not outcome(z, (strata.randn(0),))
    assert outcome(z, (strata.randn(5),))


def test_no_aliasing():
    gs = _guards.GuardSet(["a", "b", "c"])
    gs.add_no_aliasing([ARG0, ARG1, [("arg", 2)]])
    a, b = strata.randn(4), strata.randn(4)
    assert outcome(gs, (a, b, strata.randn(4)))
    assert not outcome(gs, (a, a[1:], b))
    assert why(gs, (a, b, a.view(2, 2))) == "L['a'] and L['c'] share storage (for no storage aliasing among " \
        "L['a'], L['b'], L['c'])"
    assert outcome(gs, (a, b, 3))  # non-tensors take no part
    many = _guards.GuardSet([str(i) for i in range(12)])
    many.add_no_aliasing([[("arg", i)] for i in range(12)])
    ts = [strata.randn(1) for _ in range(12)]
    assert outcome(many, tuple(ts))
    ts[9] = ts[2].view(1)
    assert not outcome(many, tuple(ts))
    assert why(many, tuple(ts)).startswith("L['2'] and L['9'] share storage")


# ---------------------------------------------------------------------------- global state

def test_grad_mode():
    gs = _guards.GuardSet([])
    gs.add_global_state(**_guards.global_state())
    assert outcome(gs, ())
    with strata.no_grad():
        assert not outcome(gs, ())
        assert why(gs, ()) == "grad_enabled == True (got False)"
    with strata.inference_mode():
        assert not outcome(gs, ())
    assert outcome(gs, ())


def test_default_dtype():
    gs = _guards.GuardSet([])
    gs.add_global_state(default_dtype=strata.float32)
    assert outcome(gs, ())
    strata.set_default_dtype(strata.float64)
    try:
        assert not outcome(gs, ())
        assert why(gs, ()) == "default_dtype: expected float32, got float64"
    finally:
        strata.set_default_dtype(strata.float32)
    assert outcome(gs, ())


def test_autocast_state():
    gs = _guards.GuardSet([])
    gs.add_global_state(autocast_enabled=False)
    assert outcome(gs, ())
    with strata.autocast(device_type="cpu", dtype=strata.bfloat16):
        assert _guards.global_state()["autocast_enabled"] is True
        assert not outcome(gs, ())
    on = _guards.GuardSet([])
    with strata.autocast(device_type="cpu", dtype=strata.bfloat16):
        on.add_global_state(**_guards.global_state())
        assert outcome(on, ())
    with strata.autocast(device_type="cpu", dtype=strata.float16):
        assert not outcome(on, ())
        assert why(on, ()) == "autocast_dtype: expected bfloat16, got float16"


# ---------------------------------------------------------------------------- construction errors

def test_bad_sources():
    gs = _guards.GuardSet(["x"])
    for bad in ([], [("attr", "x")], [("arg", 0), ("arg", 1)], [("frob", 0)], "x", [("arg", "x")],
                [("arg", 0), ("item", 1.5)]):
        with pytest.raises((TypeError, ValueError)):
            gs.add_not_none(bad)
    assert len(gs) == 0
