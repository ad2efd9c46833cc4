"""ExportedProgram: one captured graph with its signature, parameters and buffers.

An exported program is what strata.export.export returns: the graph of strata.compile's capture
(strata._C._compile.Graph), taken with fullgraph semantics, plus what is needed to call it
without the Python function: which graph input is a user input (and where it sits in the
call's arguments), a parameter, a buffer or a lifted tensor constant (by fully qualified name),
how the graph's outputs are arranged into the return value, and the state_dict.

The call signature, the output tree and the checks on non-tensor inputs are plain data (no
Python objects of the model), so that save/load (_serialize.py) can write and read them."""

import collections
import inspect

from .. import _C

_compile = _C._compile

__all__ = ["ExportedProgram", "ExportGraphSignature", "InputSpec", "OutputSpec", "InputKind", "OutputKind"]


class InputKind:
    USER_INPUT = "user_input"
    PARAMETER = "parameter"
    BUFFER = "buffer"
    CONSTANT_TENSOR = "constant_tensor"
    SYM_SIZE = "sym_size"   # an int the graph reads, computed from the user inputs' sizes (target: its tree)


class OutputKind:
    USER_OUTPUT = "user_output"


class InputSpec:
    """One graph input: kind, the graph value's name, and target: the FQN of a parameter or
    buffer, the name of a lifted constant, for a user input its path in the call's arguments
    (a tuple of steps: ("arg", name) then ("attr", a) / ("item", k)), or for a sym_size input the
    expression tree of its value over the symbols (Note [Exported symbolic sizes] in _dims.py)."""

    __slots__ = ("kind", "name", "target", "persistent")

    def __init__(self, kind, name, target, persistent=None):
        self.kind, self.name, self.target, self.persistent = kind, name, target, persistent

    def __repr__(self):
        from ._dims import tree_str
        t = path_str(self.target) if self.kind == InputKind.USER_INPUT else tree_str(self.target) \
            if self.kind == InputKind.SYM_SIZE else self.target
        extra = f", persistent={self.persistent}" if self.persistent is not None else ""
        return f"InputSpec(kind={self.kind}, name={self.name!r}, target={t!r}{extra})"


class OutputSpec:
    __slots__ = ("kind", "name", "target")

    def __init__(self, kind, name, target=None):
        self.kind, self.name, self.target = kind, name, target

    def __repr__(self):
        return f"OutputSpec(kind={self.kind}, name={self.name!r})"


class ExportGraphSignature:
    """Graph inputs in graph order (input_specs) and outputs (output_specs), with torch's views:
    parameters / buffers (FQNs), user_inputs / user_outputs (value names), inputs_to_parameters,
    inputs_to_buffers, inputs_to_lifted_tensor_constants, buffers_to_mutate (value name of a
    written graph input -> FQN: in-place writes of buffers, such as batch_norm's running stats in
    training mode, happen in the graph, on the tensors it is given)."""

    def __init__(self, input_specs, output_specs, buffers_to_mutate=None):
        self.input_specs = list(input_specs)
        self.output_specs = list(output_specs)
        self.buffers_to_mutate = dict(buffers_to_mutate or {})

    def _of(self, kind):
        return [s for s in self.input_specs if s.kind == kind]

    @property
    def parameters(self):
        return [s.target for s in self._of(InputKind.PARAMETER)]

    @property
    def buffers(self):
        return [s.target for s in self._of(InputKind.BUFFER)]

    @property
    def non_persistent_buffers(self):
        return [s.target for s in self._of(InputKind.BUFFER) if s.persistent is False]

    @property
    def lifted_tensor_constants(self):
        return [s.target for s in self._of(InputKind.CONSTANT_TENSOR)]

    @property
    def user_inputs(self):
        return [s.name for s in self._of(InputKind.USER_INPUT)]

    @property
    def user_outputs(self):
        return [s.name for s in self.output_specs]

    @property
    def inputs_to_parameters(self):
        return {s.name: s.target for s in self._of(InputKind.PARAMETER)}

    @property
    def inputs_to_buffers(self):
        return {s.name: s.target for s in self._of(InputKind.BUFFER)}

    @property
    def inputs_to_lifted_tensor_constants(self):
        return {s.name: s.target for s in self._of(InputKind.CONSTANT_TENSOR)}

    def __str__(self):
        lines = ["ExportGraphSignature("]
        lines.append("  input_specs=[")
        lines += [f"    {s!r}," for s in self.input_specs]
        lines.append("  ],")
        lines.append("  output_specs=[")
        lines += [f"    {s!r}," for s in self.output_specs]
        lines.append("  ],")
        if self.buffers_to_mutate:
            lines.append(f"  buffers_to_mutate={self.buffers_to_mutate!r},")
        lines.append(")")
        return "\n".join(lines)

    __repr__ = __str__


def path_str(path):
    out = ""
    for kind, v in path:
        if kind == "arg":
            out = str(v)
        elif kind == "attr":
            out += f".{v}"
        else:
            out += f"[{v!r}]"
    return out


def fetch(root, path):
    """The value at path (steps after the root) inside root."""
    v = root
    for kind, k in path:
        if kind == "attr":
            v = getattr(v, k)
        elif kind == "item":
            v = v[k]
        elif kind == "dict_item":
            v = dict.__getitem__(v, k)
        else:
            raise AssertionError(kind)
    return v


# -- the call signature as data ---------------------------------------------------------------

_KINDS = {
    "POSITIONAL_ONLY": inspect.Parameter.POSITIONAL_ONLY,
    "POSITIONAL_OR_KEYWORD": inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "VAR_POSITIONAL": inspect.Parameter.VAR_POSITIONAL,
    "KEYWORD_ONLY": inspect.Parameter.KEYWORD_ONLY,
    "VAR_KEYWORD": inspect.Parameter.VAR_KEYWORD,
}
_NO_DEFAULT = inspect.Parameter.empty


class CallSpec:
    """The exported callable's parameters (without `self` for a module), in order: (name, kind
    name, default or _NO_DEFAULT). Binds a call's args/kwargs to {name: value}."""

    def __init__(self, params):
        self.params = list(params)
        self.signature = inspect.Signature(
            [inspect.Parameter(n, _KINDS[k], default=d) for n, k, d in self.params])

    @classmethod
    def of(cls, fn, drop_first):
        sig = inspect.signature(fn)
        ps = list(sig.parameters.values())
        if drop_first:
            ps = ps[1:]
        return cls([(p.name, p.kind.name, p.default) for p in ps])

    def bind(self, args, kwargs, what="strata.export"):
        try:
            b = self.signature.bind(*args, **(kwargs or {}))
        except TypeError as e:
            raise TypeError(f"{what}: the arguments do not match the exported signature {self.signature}: {e}") \
                from None
        b.apply_defaults()
        return dict(b.arguments)


# -- the output tree ------------------------------------------------------------------------------

def unflatten(spec, outs):
    t = spec["type"]
    if t == "tensor":
        return outs[spec["index"]]
    if t == "const":
        return spec["value"]
    if t == "tuple":
        return tuple(unflatten(s, outs) for s in spec["items"])
    if t == "list":
        return [unflatten(s, outs) for s in spec["items"]]
    if t == "namedtuple":
        cls = spec.get("_cls")
        if cls is None:
            cls = spec["_cls"] = collections.namedtuple(spec["name"], spec["fields"])
        return cls._make(unflatten(s, outs) for s in spec["items"])
    if t == "dict":
        return dict(zip(spec["keys"], (unflatten(s, outs) for s in spec["items"])))
    raise AssertionError(t)


class ExportedProgram:
    """A function or module captured as one graph (strata.export.export).

    graph: the strata._C._compile.Graph; graph_signature: ExportGraphSignature; state_dict:
    parameters and persistent buffers by fully qualified name; constants: non-persistent buffers
    and lifted tensor constants; range_constraints: {symbol name: ValueRanges} of the dynamic dims
    (Note [Exported symbolic sizes] in _dims.py); sym_shapes: {value id: [int | expression tree]}
    for the graph values with a dynamic dim; module(): an nn.Module that runs the graph with its
    own copy of the parameters' references (load_state_dict on it works); calling the program runs
    the graph with self.state_dict. Every call checks the tensor inputs' dtypes and ranks, their
    static sizes, the symbols' ranges and the relations between dynamic sizes, and the values of
    non-tensor inputs the capture relied on."""

    def __init__(self, graph, graph_signature, state_dict, constants, call_spec, out_spec, input_checks,
                 example_inputs=None, name="forward", symbols=(), sym_shapes=None, assertions=()):
        self.graph = graph
        self.graph_signature = graph_signature
        self.state_dict = state_dict
        self.constants = constants
        self.call_spec = call_spec
        self.out_spec = out_spec
        self.input_checks = list(input_checks)
        self.example_inputs = example_inputs
        self.symbols = [dict(y) for y in symbols]
        self.sym_shapes = dict(sym_shapes or {})
        self.assertions = list(assertions)
        self.name = name
        self._runner = None
        values = graph.values
        self._input_meta = [(values[v].dtype, self.sym_shapes.get(v, list(values[v].shape))) for v in graph.inputs]

    @property
    def range_constraints(self):
        from ._dims import ValueRanges
        import math
        from ._dims import tree_eval, tree_str, tree_symbols, is_tree
        rc = {y["name"]: ValueRanges(y["min"], math.inf if y["max"] is None else y["max"]) for y in self.symbols}
        # derived dims of the inputs (b + 1), with the range their root's gives them
        for i, spec in enumerate(self.graph_signature.input_specs):
            if spec.kind != InputKind.USER_INPUT:
                continue
            for d in self._input_meta[i][1]:
                if is_tree(d) and d[0] != "sym" and len(tree_symbols(d)) == 1:
                    (n,) = tree_symbols(d)
                    r = rc[n]
                    up = math.inf if r.upper == math.inf else tree_eval(d, {n: r.upper})
                    rc.setdefault(tree_str(d), ValueRanges(tree_eval(d, {n: r.lower}), up))
        return rc

    @property
    def graph_module(self):
        return self

    def _fetch_user(self, bound, path):
        kind, name = path[0]
        if name not in bound:
            raise TypeError(f"strata.export: the call has no argument {name!r}")
        return fetch(bound[name], path[1:])

    def _inputs(self, bound, state, constants):
        specs = self.graph_signature.input_specs
        inputs = [None] * len(specs)
        for i, spec in enumerate(specs):
            if spec.kind == InputKind.USER_INPUT:
                v = self._fetch_user(bound, spec.target)
                self._check_tensor(i, spec, v)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                v = state.get(spec.target)
                if v is None:
                    v = constants.get(spec.target)
                if v is None:
                    raise KeyError(f"strata.export: no tensor for {spec.kind} {spec.target!r}")
            elif spec.kind == InputKind.SYM_SIZE:
                continue
            else:
                v = constants[spec.target]
            inputs[i] = v
        if self.symbols:
            from ._dims import tree_eval
            env = self._symbol_values(bound, specs, inputs)
            for i, spec in enumerate(specs):
                if spec.kind == InputKind.SYM_SIZE:
                    inputs[i] = tree_eval(spec.target, env)
        return inputs

    def _symbol_values(self, bound, specs, inputs):
        """Each symbol's value read from its input; checked against its range, the dynamic dims of every
        input and the relations the program relies on."""
        from ._dims import tree_eval, tree_str, is_tree
        env, where = {}, {}
        for y in self.symbols:
            path = tuple(tuple(p) for p in y["path"])
            t = self._fetch_user(bound, path)
            w = f"{path_str(path)}.shape[{y['dim']}]"
            v = int(t.shape[y["dim"]])
            c, o = y.get("coeff", 1), y.get("offset", 0)
            if (c, o) != (1, 0):   # the symbol is read from a derived dim: c * symbol + o
                if (v - o) % c or v - o < 0:
                    from ._dims import _affine_str
                    raise ValueError(f"strata.export: input {w} is {v}, but the program needs it to be "
                                     f"{_affine_str(y['name'], c, o)} for an integer {y['name']}")
                w = f"({w} - {o})//{c}" if o else f"{w}//{c}"
                v = (v - o) // c
            hi = y["max"]
            if v < y["min"] or (hi is not None and v > hi):
                rng = f"[{y['min']}, {'inf' if hi is None else hi}]"
                raise ValueError(f"strata.export: input {w} is {v}, outside the range {rng} of the dynamic dim "
                                 f"{y['name']}" + (" (sizes 0 and 1 are specialized in an exported program)"
                                                   if v < 2 else ""))
            env[y["name"]], where[y["name"]] = v, w
        for i, spec in enumerate(specs):
            if spec.kind != InputKind.USER_INPUT:
                continue
            dims = self._input_meta[i][1]
            t = inputs[i]
            for d, e in enumerate(dims):
                if is_tree(e):
                    want = tree_eval(e, env)
                    if int(t.shape[d]) != want:
                        name = tree_str(e)
                        refs = ", ".join(f"{n} = {where[n]}" for n in sorted(env) if n in name)
                        raise ValueError(f"strata.export: input {path_str(spec.target)}.shape[{d}] is {t.shape[d]}, "
                                         f"but the program needs it to be {name} = {want} ({refs})")
        from ._dims import tree_str as ts
        cmp = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
               "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
        for a, op, b in self.assertions:
            x, y_ = tree_eval(a, env), tree_eval(b, env)
            if not cmp[op](x, y_):
                names = ", ".join(f"{n} = {env[n]} ({where[n]})" for n in sorted(env))
                raise ValueError(f"strata.export: the inputs break the condition {ts(a)} {op} {ts(b)} that the "
                                 f"program was exported under ({names})")
        return env

    def _check_tensor(self, i, spec, v):
        from .. import Tensor
        from ._dims import is_tree, tree_str
        dtype, shape = self._input_meta[i]
        where = path_str(spec.target)
        if dtype is None:
            return
        shown = [tree_str(d) if is_tree(d) else d for d in shape]
        if not isinstance(v, Tensor):
            raise TypeError(f"strata.export: input {where} must be a Tensor (the program was exported with a "
                            f"{dtype} tensor of shape [{', '.join(map(str, shown))}]), got {type(v).__name__}")
        if v.dtype != dtype:
            raise ValueError(f"strata.export: input {where} is {v.dtype}, but the program was exported for {dtype}")
        if v.dim() != len(shape):
            raise ValueError(f"strata.export: input {where} has {v.dim()} dims (shape {list(v.shape)}), but the "
                             f"program was exported for {len(shape)} (shape [{', '.join(map(str, shown))}])")
        for d, e in enumerate(shape):
            if not is_tree(e) and v.shape[d] != e:
                raise ValueError(f"strata.export: input {where}.shape[{d}] is {v.shape[d]}, but the program was "
                                 f"exported with the static size {e} (shape [{', '.join(map(str, shown))}]; mark "
                                 "the dim in dynamic_shapes to vary it)")

    def _check_values(self, bound):
        for kind, path, expected in self.input_checks:
            try:
                v = self._fetch_user(bound, path)
            except (KeyError, IndexError, AttributeError, TypeError):
                raise ValueError(f"strata.export: input {path_str(path)} is missing") from None
            got = len(v) if kind == "len" else v
            if type(got) is not type(expected) or got != expected:
                what = f"len({path_str(path)})" if kind == "len" else path_str(path)
                raise ValueError(f"strata.export: {what} is {got!r} but the program was exported with "
                                 f"{expected!r} (non-tensor inputs are specialised)")

    def _run(self, args, kwargs, state, constants):
        bound = self.call_spec.bind(args, kwargs)
        self._check_values(bound)
        inputs = self._inputs(bound, state, constants)
        if self._runner is None:
            self._runner = self.graph.runner()
        outs = self._runner(*inputs)
        return unflatten(self.out_spec, outs)

    def __call__(self, *args, **kwargs):
        return self._run(args, kwargs, self.state_dict, self.constants)

    def module(self):
        """An nn.Module that runs the graph; its parameters and buffers are this program's
        tensors under their FQNs (m.layers[0].weight ...)."""
        return _make_module(self)

    def print_readable(self, print_output=True):
        s = self._readable()
        if print_output:
            print(s)
        return s

    def _readable(self):
        """The graph's listing with the dynamic dims written symbolically (f32[batch, 8])."""
        text = self.graph.print_readable()
        if not self.sym_shapes:
            return text
        import re
        from ._dims import tree_str, is_tree
        by_name = {}
        for vid, shape in self.sym_shapes.items():
            by_name[self.graph.value(vid).name] = ", ".join(tree_str(d) if is_tree(d) else str(d) for d in shape)

        def sub(m):
            shape = by_name.get(m.group(1))
            return m.group(0) if shape is None else f'{m.group(1)}: "{m.group(2)}[{shape}]"'
        text = re.sub(r'\b(\w+): "(\w+)\[([^\]"]*)\]"', sub, text)

        def multi(m):   # a, b = op(...)  # f32[3, 4], f32[3, 4]
            names = [n.strip() for n in m.group(2).split(",")]
            shapes = re.findall(r'(\w+)\[([^\]]*)\]', m.group(4))
            if len(shapes) != len(names):
                return m.group(0)
            shown = [f"{dt}[{by_name.get(n, sh)}]" for n, (dt, sh) in zip(names, shapes)]
            return f"{m.group(1)}{m.group(2)} = {m.group(3)}  # {', '.join(shown)}"
        return re.sub(r'(?m)^(\s*)(\w+(?:, \w+)+) = (.*)  # (.*)$', multi, text)

    def __str__(self):
        g = "\n".join("    " + ln for ln in self._readable().splitlines())
        return (f"ExportedProgram:\n{g}\n\nGraph signature: {self.graph_signature}\n"
                f"Range constraints: {self.range_constraints}\n")

    __repr__ = __str__

    def parameters(self):
        for name in self.graph_signature.parameters:
            yield self.state_dict[name]

    def named_parameters(self):
        for name in self.graph_signature.parameters:
            yield name, self.state_dict[name]

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    def named_buffers(self):
        for name in self.graph_signature.buffers:
            yield name, self.state_dict[name] if name in self.state_dict else self.constants[name]


def _make_module(ep):
    from ..nn import Module, Parameter

    class ExportedModule(Module):
        """The module of an ExportedProgram: forward runs the graph with this module's own
        parameters and buffers (registered under their FQNs)."""

        def __init__(self):
            super().__init__()
            object.__setattr__(self, "_strata_program", ep)

        def forward(self, *args, **kwargs):
            state = dict(self.named_parameters(remove_duplicate=False))
            state.update(self.named_buffers(remove_duplicate=False))
            return ep._run(args, kwargs, state, ep.constants)

        def __repr__(self):
            return f"ExportedModule({ep.name}, {len(ep.graph.nodes)} nodes)"

    m = ExportedModule()
    kinds = {s.target: s for s in ep.graph_signature.input_specs if s.kind in (InputKind.PARAMETER,
                                                                                 InputKind.BUFFER)}
    for fqn, spec in kinds.items():
        *parents, leaf = fqn.split(".")
        owner = m
        for p in parents:
            sub = owner._modules.get(p)
            if sub is None:
                sub = Module()
                owner.add_module(p, sub)
            owner = sub
        t = ep.state_dict.get(fqn)
        if t is None:
            t = ep.constants[fqn]
        if spec.kind == InputKind.PARAMETER:
            owner.register_parameter(leaf, t if isinstance(t, Parameter) else Parameter(t, t.requires_grad))
        else:
            owner.register_buffer(leaf, t, persistent=spec.persistent is not False)
    return m
