"""RNN, LSTM, GRU and their single-step cells.

Each layer and direction is one op call (strata._C._ops._lstm_layer, _gru_layer, _rnn_tanh_layer, _rnn_relu_layer)
that runs the whole time loop in C++ with the gate math fused, forward and backward; this module only stacks layers
and directions, applies dropout between layers and handles the torch conventions (batch_first, unbatched input,
PackedSequence input, default states). Parameters have torch's names, shapes and initialisation.
"""

import math
import numbers
import warnings

from ... import _C
from ... import cat, stack, zeros
from .. import functional as F
from .. import init
from ..utils.rnn import PackedSequence
from ._util import new_param
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_ops = _C._ops
Tensor = _C.Tensor

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _layer_op(mode):
    return {"LSTM": _ops._lstm_layer, "GRU": _ops._gru_layer, "RNN_TANH": _ops._rnn_tanh_layer,
            "RNN_RELU": _ops._rnn_relu_layer}[mode]


def _check_size(value, what):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} should be of type int, got: {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{what} must be greater than zero")
    return value


class RNNBase(Module):
    """The stacked, optionally bidirectional recurrent layer behind RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = _check_size(hidden_size, "hidden_size")
        self.num_layers = _check_size(num_layers, "num_layers")
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout) if isinstance(dropout, numbers.Number) and not isinstance(dropout, bool) else dropout
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}")
        if not isinstance(proj_size, int) or proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        dirs = 2 if bidirectional else 1
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(dirs):
                layer_input = input_size if layer == 0 else real_hidden * dirs
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih_l{}{}", (gate_size, layer_input)), ("weight_hh_l{}{}", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih_l{}{}", (gate_size,)), ("bias_hh_l{}{}", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr_l{}{}", (proj_size, hidden_size)))
                names = []
                for fmt, shape in shapes:
                    name = fmt.format(layer, suffix)
                    setattr(self, name, new_param(shape, device, dtype))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        p = self._parameters
        return [p[n] if n in p else getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """Does nothing: torch packs cuDNN's weights into one buffer here; strata's layers read the parameters
        in place, so there is nothing to flatten."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _real_hidden(self):
        return self.proj_size if self.proj_size > 0 else self.hidden_size

    # ---- argument checks (torch's messages) -------------------------------------------------------------------
    def check_input(self, input, batch_sizes):
        w = self._flat_weights[0]
        if input.dtype != w.dtype:
            raise ValueError(f"input must have the type {w.dtype}, got type {input.dtype}")
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def _mini_batch(self, input, batch_sizes):
        if batch_sizes is not None:
            return int(batch_sizes[0]) if batch_sizes.numel() else 0
        return input.size(0) if self.batch_first else input.size(1)

    def get_expected_hidden_size(self, input, batch_sizes):
        dirs = 2 if self.bidirectional else 1
        return (self.num_layers * dirs, self._mini_batch(input, batch_sizes), self._real_hidden())

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.shape)))

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return hx.index_select(1, permutation)

    # ---- the layers -----------------------------------------------------------------------------------------
    def _run(self, x, h0, c0, batch_sizes):
        """x: (T, B, I) or packed (N, I); h0/c0: (layers * dirs, B, .). Returns (output, h_n, c_n or None)."""
        op = _layer_op(self.mode)
        lstm = self.mode == "LSTM"
        dirs = 2 if self.bidirectional else 1
        weights = self._flat_weights
        per = len(weights) // (self.num_layers * dirs)
        hs, cs = [], []
        dropout = self.dropout if self.training else 0.0
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                w = weights[k * per:(k + 1) * per]
                b_ih, b_hh = (w[2], w[3]) if self.bias else (None, None)
                if lstm:
                    r = op(x, h0[k], c0[k], w[0], w[1], b_ih, b_hh, w[-1] if self.proj_size > 0 else None,
                           batch_sizes, d == 1)
                    cs.append(r[2])
                else:
                    r = op(x, h0[k], w[0], w[1], b_ih, b_hh, batch_sizes, d == 1)
                outs.append(r[0])
                hs.append(r[1])
            x = outs[0] if dirs == 1 else cat(outs, -1)
            if dropout > 0 and layer < self.num_layers - 1:
                x = F.dropout(x, dropout, True)
        return x, stack(hs), (stack(cs) if lstm else None)

    def _prepare(self, input, hx, name):
        """Unpacks input; returns (x, hx, batch_sizes, sorted_indices, unsorted_indices, batched)."""
        if isinstance(input, PackedSequence):
            x, batch_sizes, sorted_indices, unsorted_indices = input
            return x, hx, batch_sizes, sorted_indices, unsorted_indices, True
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                             f"{'tensor ' if name == 'RNN' else ''}instead")
        return input, hx, None, None, None, input.dim() == 3

    def _zeros(self, x, batch, size):
        dirs = 2 if self.bidirectional else 1
        return zeros((self.num_layers * dirs, batch, size), dtype=x.dtype, device=x.device)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class _SingleStateRNN(RNNBase):
    """RNN and GRU: one hidden state."""

    _name = "RNN"

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        x, hx, batch_sizes, sorted_indices, unsorted_indices, batched = self._prepare(input, hx, self._name)
        batch_dim = 0 if self.batch_first else 1
        if not packed:
            if not batched:
                x = x.unsqueeze(batch_dim)
                if hx is not None:
                    if hx.dim() != 2:
                        raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D "
                                           "tensor")
                    hx = hx.unsqueeze(1)
            elif hx is not None and hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
        if hx is None:
            hx = self._zeros(x, self._mini_batch(x, batch_sizes), self.hidden_size)
        else:
            hx = self.permute_hidden(hx, sorted_indices)
        self.check_forward_args(x, hx, batch_sizes)
        if not packed:
            if x.size(1 if self.batch_first else 0) == 0:
                raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
            if self.batch_first:
                x = x.transpose(0, 1)
        out, h_n, _ = self._run(x, hx, None, batch_sizes)
        if packed:
            return PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices), \
                self.permute_hidden(h_n, unsorted_indices)
        if self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(batch_dim)
            h_n = h_n.squeeze(1)
        return out, h_n


class RNN(_SingleStateRNN):
    """Elman RNN: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = nonlinearity


class GRU(_SingleStateRNN):
    """Gated recurrent unit (torch's formulation: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)))."""

    _name = "GRU"

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory, optionally with a projection of h (proj_size)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        dirs = 2 if self.bidirectional else 1
        return (self.num_layers * dirs, self._mini_batch(input, batch_sizes), self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        x, hx, batch_sizes, sorted_indices, unsorted_indices, batched = self._prepare(input, hx, "LSTM")
        batch_dim = 0 if self.batch_first else 1
        if not packed:
            if not batched:
                x = x.unsqueeze(batch_dim)
                if hx is not None:
                    if hx[0].dim() != 2 or hx[1].dim() != 2:
                        raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got "
                                           f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                    hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
            elif hx is not None and (hx[0].dim() != 3 or hx[1].dim() != 3):
                raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got "
                                   f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
        if hx is None:
            batch = self._mini_batch(x, batch_sizes)
            hx = (self._zeros(x, batch, self._real_hidden()), self._zeros(x, batch, self.hidden_size))
        else:
            hx = self.permute_hidden(hx, sorted_indices)
        self.check_forward_args(x, hx, batch_sizes)
        if not packed:
            if x.size(1 if self.batch_first else 0) == 0:
                raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
            if self.batch_first:
                x = x.transpose(0, 1)
        out, h_n, c_n = self._run(x, hx[0], hx[1], batch_sizes)
        if packed:
            return PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices), \
                self.permute_hidden((h_n, c_n), unsorted_indices)
        if self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(batch_dim)
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return out, (h_n, c_n)


# ---- cells ------------------------------------------------------------------------------------------------------

class RNNCellBase(Module):
    """One step of a recurrent layer; runs the same fused op as the layers, over a single step."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = new_param((num_chunks * hidden_size, input_size), device, dtype)
        self.weight_hh = new_param((num_chunks * hidden_size, hidden_size), device, dtype)
        if bias:
            self.bias_ih = new_param((num_chunks * hidden_size,), device, dtype)
            self.bias_hh = new_param((num_chunks * hidden_size,), device, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = self.__dict__.get("nonlinearity")
        if nl is not None and nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _check(self, name, input, hxs):
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        for h in hxs:
            if h is not None and h.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {h.dim()}D instead")
        if input.size(-1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(-1)} expected {self.input_size}")

    def _check_hidden(self, input, hx, which):
        if input.size(0) != hx.size(0):
            raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{which} batch size "
                               f"{hx.size(0)}")
        if hx.size(1) != self.hidden_size:
            raise RuntimeError(f"hidden{which} has inconsistent hidden_size: got {hx.size(1)}, expected "
                               f"{self.hidden_size}")

    def _state(self, input, hx, batched):
        if hx is None:
            return zeros((input.size(0), self.hidden_size), dtype=input.dtype, device=input.device)
        return hx if batched else hx.unsqueeze(0)


class RNNCell(RNNCellBase):
    """h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        self._check("RNNCell", input, (hx,))
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        h = self._state(x, hx, batched)
        self._check_hidden(x, h, "0")
        op = _ops._rnn_tanh_layer if self.nonlinearity == "tanh" else _ops._rnn_relu_layer
        r = op(x.unsqueeze(0), h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return r[1] if batched else r[1].squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        self._check("LSTMCell", input, hx if hx is not None else ())
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        h, c = (None, None) if hx is None else hx
        h, c = self._state(x, h, batched), self._state(x, c, batched)
        self._check_hidden(x, h, "0")
        self._check_hidden(x, c, "1")
        r = _ops._lstm_layer(x.unsqueeze(0), h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return (r[1], r[2]) if batched else (r[1].squeeze(0), r[2].squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        self._check("GRUCell", input, (hx,))
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        h = self._state(x, hx, batched)
        self._check_hidden(x, h, "0")
        r = _ops._gru_layer(x.unsqueeze(0), h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return r[1] if batched else r[1].squeeze(0)
