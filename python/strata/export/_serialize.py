"""strata.export.save / load: an ExportedProgram as one self-contained file.

The file is a zip archive (stored, not compressed) with two members:

* ``strata_export/program.json``: the graph and its signature, as data.
    - ``values``: every graph value: id, name, kind (tensor/int/float/bool), origin
      (input/constant/op), dtype, shape, stride, device, requires_grad;
    - ``inputs`` / ``outputs``: value ids in order; ``constants``: the graph's own constants
      (a number, or a tensor stored under ``graph_constants/<id>``);
    - ``nodes``: in program order, each the op's full name (``name`` or ``name.overload``, as
      the dispatcher finds it), its schema text (checked at load), its arguments in schema order,
      its output value ids, its source line and its grad mode. An argument is ``{"value": id}``,
      ``{"graph_device": true}`` (the device of the graph's first tensor input at run time), a
      list ``{"list": [...]}``, or a tagged constant (``{"int": 3}``, ``{"float": "nan"}``,
      ``{"ints": [..]}``, ``{"dtype": "float32"}``, ``{"device": "cpu"}``, ``{"str": ..}``,
      ``{"bool": ..}``, ``{"none": true}``); a number given for a Tensor argument is a wrapped
      number again when loaded;
    - ``signature``: input specs (kind, value name, FQN / constant name / path in the call's
      arguments, persistence) and output specs, buffers_to_mutate; ``call``: the parameters of
      the call (name, kind, default when it is a plain constant); ``out_spec``: how outputs
      are arranged; ``input_checks``: the non-tensor inputs the graph is specialised on;
    - ``symbolic`` (dynamic dims, Note [Exported symbolic sizes] in _dims.py): the symbols (name,
      the input path and dim their value is read from, range), the symbolic shape of each value
      with a dynamic dim and the relations checked at each call; a ``sym_size`` input spec has its
      expression tree and its value at the capture (the graph is rebuilt at the capture's sizes).
* ``strata_export/tensors.safetensors``: parameters and buffers by FQN, lifted constants
  (``constants/<name>``) and graph constants, in strata.save's safetensors format.

load rebuilds the graph op by op with Graph.add_node (which records each node exactly as a
capture would) and checks that every rebuilt value has the recorded dtype and shape. Nothing
is unpickled and no model code is needed."""

import io
import json
import math
import os
import zipfile

from .. import _C
from ._program import (ExportedProgram, ExportGraphSignature, InputSpec, OutputSpec, CallSpec, _NO_DEFAULT)

_compile = _C._compile

FORMAT = "strata.export"
VERSION = 1
_PROGRAM = "strata_export/program.json"
_TENSORS = "strata_export/tensors.safetensors"


def _dtype_name(d):
    return None if d is None else str(d).split(".")[-1]


def _dtype_of(name):
    import strata
    d = getattr(strata, name, None)
    if not isinstance(d, strata.dtype):
        raise ValueError(f"strata.export.load: unknown dtype {name!r}")
    return d


def _enc_float(x):
    if math.isnan(x) or math.isinf(x):
        return repr(x)
    return x


def _dec_float(x):
    return float(x)


def _enc_const(v):
    import strata
    if v is None:
        return {"none": True}
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, float):
        return {"float": _enc_float(v)}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, strata.dtype):
        return {"dtype": _dtype_name(v)}
    if isinstance(v, strata.device):
        return {"device": str(v)}
    raise TypeError(f"strata.export.save: cannot write the constant {v!r} ({type(v).__name__})")


def _enc_arg(a):
    if isinstance(a, _compile.Value):
        return {"value": a.id}
    if isinstance(a, _compile.GraphDevice):
        return {"graph_device": True}
    if isinstance(a, list):
        if a and all(type(x) is int for x in a):
            return {"ints": a}
        return {"list": [_enc_arg(x) for x in a]}
    return _enc_const(a)


def _dec_arg(a, g, ids):
    import strata
    (k, v), = a.items()
    if k == "value":
        return g.value(ids[v])
    if k == "graph_device":
        return _compile.GraphDevice()
    if k == "list":
        return [_dec_arg(x, g, ids) for x in v]
    if k == "ints":
        return list(v)
    if k == "none":
        return None
    if k in ("bool", "int", "str"):
        return v
    if k == "float":
        return _dec_float(v)
    if k == "dtype":
        return _dtype_of(v)
    if k == "device":
        return strata.device(v)
    raise ValueError(f"strata.export.load: unknown argument tag {k!r}")


def _enc_default(d):
    if d is _NO_DEFAULT:
        return None
    try:
        return _enc_const(d)
    except TypeError:
        return None  # not plain data: the loaded program requires the argument


def _strip(spec):
    return {k: ([_strip(s) for s in v] if k == "items" else v) for k, v in spec.items() if k != "_cls"}


def _path_to_json(path):
    return [[k, v] for k, v in path]


def _path_from_json(p):
    return tuple((k, v) for k, v in p)


def _describe(ep):
    g = ep.graph
    values = []
    for v in g.values:
        d = {"id": v.id, "name": v.name, "kind": v.kind,
             "origin": "input" if v.is_input else "constant" if v.is_constant else "op"}
        if v.kind == "tensor":
            d.update(dtype=_dtype_name(v.dtype), shape=list(v.shape), stride=list(v.stride), device=v.device,
                     requires_grad=v.requires_grad)
        values.append(d)
    tensors = {}
    consts = []
    for cid in g.constants:
        v = g.value(cid)
        c = v.constant
        if v.kind == "tensor":
            key = f"graph_constants/{cid}"
            tensors[key] = c
            consts.append({"id": cid, "name": v.name, "tensor": key})
        else:
            consts.append({"id": cid, "name": v.name, "number": _enc_const(c)})
    nodes = []
    for n in g.nodes:
        try:
            args = [_enc_arg(a) for a in n.args]
        except TypeError as e:
            raise TypeError(f"{e} (argument of {n.op} at {n.source or '<unknown line>'})") from None
        nodes.append({"op": n.op, "schema": n.schema, "args": args, "outputs": list(n.outputs),
                      "source": n.source, "grad_enabled": n.grad_enabled})
    sig = ep.graph_signature
    hints = _symbol_hints(ep)
    inputs = []
    for s in sig.input_specs:
        d = {"kind": s.kind, "name": s.name}
        if s.kind == "user_input":
            d["path"] = _path_to_json(s.target)
        elif s.kind == "sym_size":
            d["expr"] = s.target
            d["hint"] = _tree_eval(s.target, hints)
        else:
            d["target"] = s.target
            if s.kind == "parameter" or (s.kind == "buffer" and s.persistent is not False):
                tensors[s.target] = ep.state_dict[s.target]
            else:
                tensors[f"constants/{s.target}"] = ep.constants[s.target]
            if s.persistent is not None:
                d["persistent"] = s.persistent
        inputs.append(d)
    desc = {
        "format": FORMAT, "version": VERSION, "name": ep.name,
        "graph": {"values": values, "inputs": list(g.inputs), "constants": consts, "nodes": nodes,
                  "outputs": list(g.outputs)},
        "signature": {"inputs": inputs, "outputs": [{"kind": s.kind, "name": s.name} for s in sig.output_specs],
                      "buffers_to_mutate": sig.buffers_to_mutate},
        "call": [{"name": n, "kind": k, "default": _enc_default(d)} for n, k, d in ep.call_spec.params],
        "out_spec": _strip(ep.out_spec),
        "input_checks": [{"kind": k, "path": _path_to_json(p), "value": _enc_const(v)} for k, p, v in ep.input_checks],
        "symbolic": {"symbols": ep.symbols, "sym_shapes": [[vid, shape] for vid, shape in ep.sym_shapes.items()],
                     "assertions": [list(a) for a in ep.assertions]},
    }
    return desc, tensors


def _symbol_hints(ep):
    """The symbols' values at the capture (the example sizes the graph's values were recorded at)."""
    g = ep.graph
    hints = {}
    paths = {tuple(tuple(p) for p in s.target): vid for vid, s in zip(g.inputs, ep.graph_signature.input_specs)
             if s.kind == "user_input"}
    for y in ep.symbols:
        vid = paths.get(tuple(tuple(p) for p in y["path"]))
        if vid is not None:
            hints[y["name"]] = (g.value(vid).shape[y["dim"]] - y.get("offset", 0)) // y.get("coeff", 1)
    return hints


def _tree_eval(t, env):
    from ._dims import tree_eval
    return tree_eval(t, env)


def save(ep, f):
    """Writes ep to f (a path or a writable binary file) as a zip archive (see the module
    docstring for the layout). The file runs without the model's Python source."""
    from .. import save as _save, Tensor
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"strata.export.save: expected an ExportedProgram, got {type(ep).__name__}")
    desc, tensors = _describe(ep)
    buf = io.BytesIO()
    plain = {k: (t.detach() if isinstance(t, Tensor) else t) for k, t in tensors.items()}
    plain = {k: (t.cpu() if t.device.type != "cpu" else t) for k, t in plain.items()}
    _save(plain, buf, format="safetensors")

    def write(fh):
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as z:
            z.writestr(_PROGRAM, json.dumps(desc, indent=1, allow_nan=False))
            z.writestr(_TENSORS, buf.getvalue())

    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            write(fh)
    else:
        write(f)


def load(f):
    """Reads an ExportedProgram written by save (a path or a readable binary file)."""
    from .. import load as _load
    try:
        z = zipfile.ZipFile(f if not isinstance(f, (str, os.PathLike)) else os.fspath(f))
    except zipfile.BadZipFile:
        raise ValueError("strata.export.load: not a strata.export archive (not a zip file)") from None
    with z:
        names = set(z.namelist())
        if _PROGRAM not in names or _TENSORS not in names:
            raise ValueError(f"strata.export.load: not a strata.export archive (needs {_PROGRAM} and {_TENSORS})")
        desc = json.loads(z.read(_PROGRAM))
        tensors = _load(io.BytesIO(z.read(_TENSORS)))
    if desc.get("format") != FORMAT or desc.get("version") != VERSION:
        raise ValueError(f"strata.export.load: unsupported archive format {desc.get('format')!r} version "
                         f"{desc.get('version')!r} (this strata reads {FORMAT} version {VERSION})")
    return _rebuild(desc, tensors)


def _tensor_on(t, device, requires_grad=False):
    if device and str(t.device) != device:
        try:
            t = t.to(device)
        except Exception:
            pass  # the device is not available here: keep the tensor where it loaded
    if requires_grad:
        t.requires_grad_(True)
    return t


def _reads_ints(args):
    for a in args:
        for x in (a if isinstance(a, list) else [a]):
            if isinstance(x, _compile.Value) and x.kind != "tensor":
                return True
    return False


def _record_with_symints(g, n, args, schema, hints):
    """A node that reads int graph values (sizes computed from dynamic dims, Note [Symbolic ints in
    recorded nodes] in src/compile/graph.h): recorded as the capture recorded it, by calling the op
    through the binding with Meta tensors bound to its tensor values and, for each int value, an int
    carrying the value's id."""
    import strata
    from .._dynamo.symshape import SymInt

    def real(a):
        if isinstance(a, _compile.Value):
            if a.kind == "tensor":
                m = strata.empty_strided(tuple(a.shape), tuple(a.stride), dtype=a.dtype, device="meta")
                if a.requires_grad:
                    m.requires_grad_(True)
                g.bind(m, a.id)
                return m
            if a.name not in hints:
                raise ValueError(f"strata.export.load: {n['op']} reads the int value {a.name}, which is not a size "
                                 "the program computes")
            return SymInt(hints[a.name], a.id)
        if isinstance(a, _compile.GraphDevice):
            return strata.device("meta")
        if isinstance(a, list):
            return [real(x) for x in a]
        return a

    pos, kw = [], {}
    for spec, a in zip(schema["args"], args):
        (kw.__setitem__(spec["name"], real(a)) if spec["kwarg_only"] else pos.append(real(a)))
    fn = getattr(_C._ops, schema["name"])
    prev = _compile.set_note_symints(True)
    grad = _C._is_grad_enabled()
    _C._set_grad_enabled(n["grad_enabled"])
    _compile.set_source(n["source"] or "")
    before = len(g.nodes)
    try:
        with _compile.record(g):
            res = fn(*pos, **kw)
    finally:
        _compile.set_source("")
        _C._set_grad_enabled(grad)
        _compile.set_note_symints(prev)
    if len(g.nodes) != before + 1 or g.nodes[-1].op != n["op"]:
        raise ValueError(f"strata.export.load: recording {n['op']} again made "
                         f"{[x.op for x in g.nodes[before:]]} (at {n['source'] or '<unknown line>'})")
    return list(g.nodes[-1].outputs)


def _rebuild(desc, tensors):
    import strata
    gd = desc["graph"]
    vals = {v["id"]: v for v in gd["values"]}
    g = _compile.Graph()
    ids = {}
    hints = {s["name"]: s["hint"] for s in desc["signature"]["inputs"] if s["kind"] == "sym_size"}
    for vid in gd["inputs"]:
        v = vals[vid]
        if v["kind"] == "tensor":
            meta = strata.empty_strided(tuple(v["shape"]), tuple(v["stride"]), dtype=_dtype_of(v["dtype"]),
                                        device="meta")
            if v["requires_grad"]:
                meta.requires_grad_(True)
            ids[vid] = g.add_input(v["name"], meta, device=v["device"])
        else:
            ids[vid] = g.add_input(v["name"], hints.get(v["name"], {"int": 0, "float": 0.0, "bool": False}[v["kind"]]))
    for c in gd["constants"]:
        if "tensor" in c:
            v = vals[c["id"]]
            ids[c["id"]] = g.add_constant(_tensor_on(tensors[c["tensor"]], v.get("device")), c["name"])
        else:
            ids[c["id"]] = g.add_constant(_dec_arg(c["number"], g, ids), c["name"])
    from .. import _C as C
    schemas, schema_args = {}, {}
    for s in C._op_schemas():
        schemas[s["name"] + ("." + s["overload"] if s["overload"] else "")] = s["schema"]
        schema_args[s["name"] + ("." + s["overload"] if s["overload"] else "")] = s
    for n in gd["nodes"]:
        if schemas.get(n["op"]) is None:
            raise ValueError(f"strata.export.load: the program uses op {n['op']!r}, which this strata does not "
                             f"have (at {n['source'] or '<unknown line>'})")
        if schemas[n["op"]] != n["schema"]:
            raise ValueError(f"strata.export.load: op {n['op']} changed its schema since the program was saved "
                             f"(saved: {n['schema']}; now: {schemas[n['op']]})")
        args = [_dec_arg(a, g, ids) for a in n["args"]]
        if _reads_ints(args):
            outs = _record_with_symints(g, n, args, schema_args[n["op"]], hints)
        else:
            outs = g.add_node(n["op"], args, source=n["source"], grad_enabled=n["grad_enabled"])
        if len(outs) != len(n["outputs"]):
            raise ValueError(f"strata.export.load: {n['op']} produced {len(outs)} results, the archive has "
                             f"{len(n['outputs'])}")
        for old, new in zip(n["outputs"], outs):
            ids[old] = new
            v, nv = vals[old], g.value(new)
            if v["kind"] != nv.kind or (v["kind"] == "tensor" and v["dtype"] is not None and (
                    _dtype_name(nv.dtype) != v["dtype"] or list(nv.shape) != v["shape"])):
                raise ValueError(f"strata.export.load: {n['op']} at {n['source'] or '<unknown line>'} gives "
                                 f"{nv!r}, the archive recorded {v['kind']} {v.get('dtype')}{v.get('shape')}")
    g.set_outputs([ids[o] for o in gd["outputs"]])

    sd = desc["signature"]
    specs, state_dict, constants = [], {}, {}
    new_inputs = g.inputs
    for vid_new, s in zip(new_inputs, sd["inputs"]):
        name = g.value(vid_new).name
        if s["kind"] == "user_input":
            specs.append(InputSpec("user_input", name, _path_from_json(s["path"])))
            continue
        if s["kind"] == "sym_size":
            specs.append(InputSpec("sym_size", name, s["expr"]))
            continue
        target = s["target"]
        persistent = s.get("persistent")
        specs.append(InputSpec(s["kind"], name, target, persistent))
        gv = g.value(vid_new)
        if s["kind"] == "parameter" or (s["kind"] == "buffer" and persistent is not False):
            t = _tensor_on(tensors[target], gv.device)
            if s["kind"] == "parameter":
                from ..nn import Parameter
                t = Parameter(t, gv.requires_grad)
            state_dict[target] = t
        else:
            constants[target] = _tensor_on(tensors[f"constants/{target}"], gv.device)
    out_specs = [OutputSpec(o["kind"], o["name"]) for o in sd["outputs"]]
    sig = ExportGraphSignature(specs, out_specs, sd.get("buffers_to_mutate"))
    params = []
    for p in desc["call"]:
        d = _NO_DEFAULT if p["default"] is None else _dec_arg(p["default"], g, ids)
        params.append((p["name"], p["kind"], d))
    checks = [(c["kind"], _path_from_json(c["path"]), _dec_arg(c["value"], g, ids)) for c in desc["input_checks"]]
    sym = desc.get("symbolic") or {}
    sym_shapes = {ids[vid]: shape for vid, shape in sym.get("sym_shapes", ()) if vid in ids}
    return ExportedProgram(g, sig, state_dict, constants, CallSpec(params), desc["out_spec"], checks,
                           name=desc.get("name", "forward"), symbols=sym.get("symbols", ()), sym_shapes=sym_shapes,
                           assertions=[tuple(a) for a in sym.get("assertions", ())])
