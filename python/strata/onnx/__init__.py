"""strata.onnx: exports a model to ONNX (torch.onnx.export's signature).

The model is captured with strata.export (one graph, fullgraph semantics: a graph break
raises), then each graph node is lowered to ONNX operators (_lowering.py) with the `onnx`
package: parameters and buffers become initializers named by their fully qualified names,
user inputs the graph inputs, dtypes are mapped, and dynamic_axes become symbolic dimensions
(dim_param) of the inputs' and outputs' shapes. The `onnx` package is imported only when
export is called."""

import enum

__all__ = ["export", "is_in_onnx_export", "UnsupportedOperatorError", "OnnxExporterError"]

_exporting = False


class OnnxExporterError(RuntimeError):
    """The model cannot be exported to ONNX."""


class UnsupportedOperatorError(OnnxExporterError):
    """A captured op has no ONNX lowering."""


def is_in_onnx_export():
    return _exporting


def export(model, args=(), f=None, *, kwargs=None, export_params=True, verbose=None, input_names=None,
           output_names=None, opset_version=None, dynamic_axes=None, keep_initializers_as_inputs=False,
           training=None, do_constant_folding=True, dynamo=False, dynamic_shapes=None, **unsupported):
    """Exports model(*args, **kwargs) to ONNX and writes it to f (a path or a binary file
    object); with f=None returns the onnx.ModelProto instead.

    args: a tuple of example inputs (a single Tensor is accepted; a trailing dict in args is
    taken as keyword arguments, as torch does). input_names / output_names name the graph's
    user inputs and flattened outputs in order (default: the captured values' names).
    dynamic_axes: {name: {axis: "dim_name"}} or {name: [axis, ...]} for inputs and outputs; the
    input axes are captured as symbols (strata.export with dynamic_shapes, one Dim per dim name, so
    axes with one name are one size), written as dim_params, and the sizes the model computes from
    them (x.view(b, t, h, d)) are computed in the ONNX graph with Shape/Gather, so the model runs at
    other sizes. dynamic_shapes (strata.export's form) may be given instead. When the program cannot
    keep a dynamic_axes dim symbolic (it needs the size fixed) export warns and falls back to a
    static capture whose reshapes follow the marked dims (Note [Symbolic dimensions]).
    opset_version defaults to 17 (the lowest supported: the
    lowering uses LayerNormalization). A module is exported in eval mode (training=None or
    "eval"), its mode restored afterwards. export_params=False writes no initializer data: the
    parameters become extra graph inputs named by their FQNs."""
    global _exporting
    op_type = unsupported.pop("operator_export_type", None)
    if op_type is not None and op_type != OperatorExportTypes.ONNX:
        raise OnnxExporterError(f"strata.onnx.export: operator_export_type={op_type} is not supported: only "
                                "OperatorExportTypes.ONNX (standard ONNX operators) is")
    if unsupported:
        raise TypeError(f"strata.onnx.export: unsupported arguments: {', '.join(sorted(unsupported))}")
    from .. import Tensor
    from ..nn import Module
    if isinstance(args, Tensor):
        args = (args,)
    elif not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    if args and isinstance(args[-1], dict) and kwargs is None:
        args, kwargs = args[:-1], args[-1]
    opset = 17 if opset_version is None else int(opset_version)
    if opset < 17:
        raise OnnxExporterError(f"strata.onnx.export: opset_version {opset} is not supported; the lowering needs "
                                "opset 17 or later (LayerNormalization)")
    train_mode = str(training).lower().split(".")[-1] if training is not None else "eval"
    if train_mode not in ("eval", "preserve", "training", "false", "true"):
        raise ValueError(f"strata.onnx.export: unknown training mode {training!r}")
    from ..export import export as _export_program
    from ._lowering import lower
    was_training = model.training if isinstance(model, Module) else None
    if isinstance(model, Module) and train_mode in ("eval", "false"):
        model.eval()
    elif isinstance(model, Module) and train_mode in ("training", "true"):
        model.train()
    _exporting = True
    try:
        ep = _export_program(model, tuple(args), kwargs, dynamic_shapes=dynamic_shapes)
        if dynamic_axes and dynamic_shapes is None:
            ep = _with_dynamic_axes(ep, model, tuple(args), kwargs, dynamic_axes, input_names)
        proto = lower(ep, opset=opset, input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes, export_params=export_params,
                      params_as_inputs=not export_params or keep_initializers_as_inputs)
    finally:
        _exporting = False
        if was_training is not None:
            model.train(was_training)
    if verbose:
        print(ep.graph.print_readable())
    if f is None:
        return proto
    import onnx
    onnx.save_model(proto, f)
    return None


def _with_dynamic_axes(ep, model, args, kwargs, dynamic_axes, input_names):
    """The program captured again with the inputs' dynamic_axes as Dims (one per dim name); ep (static)
    tells which graph input each input name is."""
    import warnings
    from ..export import export as _export_program, Dim, ExportError
    from ..export._program import fetch
    user = [s for s in ep.graph_signature.input_specs if s.kind == "user_input"]
    names = list(input_names or [])
    names += [s.name for s in user[len(names):]]
    bound = ep.call_spec.bind(args, kwargs)
    made, shapes = {}, {}
    for spec, nm in zip(user, names):
        axes = dynamic_axes.get(nm)
        if axes is None:
            continue
        if not isinstance(axes, dict):
            axes = {int(k): f"{nm}_dynamic_axes_{int(k) + 1}" for k in axes}
        t = fetch(bound[spec.target[0][1]], spec.target[1:])
        dims = {}
        for k, dn in axes.items():
            k = int(k)
            if not -t.dim() <= k < t.dim():
                raise ValueError(f"strata.onnx.export: dynamic_axes: input {nm!r} has {t.dim()} dimensions, no "
                                 f"axis {k}")
            dims[k % t.dim()] = made.setdefault(str(dn), Dim(str(dn)))
        _set_at(shapes, bound, spec.target, dims)
    if not shapes:
        return ep
    try:
        return _export_program(model, args, kwargs, dynamic_shapes=shapes)
    except ExportError as e:
        warnings.warn(f"strata.onnx.export: the dynamic_axes cannot stay symbolic in the captured program, so it is "
                      f"captured with static sizes and only reshapes follow the dynamic axes ({e})", stacklevel=3)
        return ep


def _set_at(shapes, bound, path, dims):
    """shapes[arg]...[step] = dims, making the lists/dicts on the way (None for the other items)."""
    name = path[0][1]
    if len(path) == 1:
        shapes[name] = dims
        return
    value = bound[name]
    holder, key = shapes, name
    for kind, k in path[1:]:
        cur = holder.get(key) if isinstance(holder, dict) else holder[key]
        if cur is None:
            cur = [None] * len(value) if isinstance(value, (list, tuple)) else {}
            holder[key] = cur
        holder, key = cur, k
        value = value[k]
    holder[key] = dims


class _IntEnum(enum.Enum):
    """An enum that converts to int (as torch's C++ enums do) and prints as Class.MEMBER."""

    def __int__(self):
        return self.value

    __index__ = __int__


class OperatorExportTypes(_IntEnum):
    """torch.onnx.OperatorExportTypes: how non-ONNX ops are exported (Strata exports standard ONNX only)."""
    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


class TrainingMode(_IntEnum):
    """torch.onnx.TrainingMode: export(training=...) (eval mode, the module's current mode, or train mode)."""
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2
