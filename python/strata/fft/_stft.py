"""strata.stft / strata.istft (and the Tensor methods): short-time Fourier transforms as torch computes them,
composed of differentiable ops (pad, unfold, the FFT primitives, index_add for the overlap-add), so gradients
reach the input and the window."""

import sys as _sys
import warnings as _warnings

from .. import _C
from . import _check_input, _dtype_name

_ops = _C._ops


def _strata():
    return _sys.modules["strata"]

_fft_c2c = _ops._fft_c2c
_fft_r2c = _ops._fft_r2c
_fft_c2r = _ops._fft_c2r


def _full_window(fname, window, win_length, n_fft, like):
    """The window padded with zeros to n_fft points, centred (torch's rule); a rectangle when None."""
    if window is None:
        real = _C.float64 if like.dtype in (_C.float64, _C.complex128) else _C.float32
        window = _ops.ones([win_length], dtype=real, device=like.device)
    else:
        if window.dim() != 1 or window.shape[0] != win_length:
            raise RuntimeError(f"{fname}: expected a 1D window tensor of size equal to win_length={win_length}, "
                               f"but got window with size {list(window.shape)}")
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = _ops.pad(window, [left, n_fft - win_length - left], "constant", 0.0)
    return window


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None, align_to_window=None):
    """Short-time Fourier transform: (batch?, n_fft // 2 + 1 or n_fft, frames)."""
    fname = "stft"
    _check_input(fname, input)
    if align_to_window:
        raise NotImplementedError("stft: align_to_window=True is not supported")
    complex_in = input.is_complex() or (window is not None and window.is_complex())
    if return_complex is None:
        if not complex_in:
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will "
                               "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if input.dim() not in (1, 2):
        raise RuntimeError(f"{fname}: expected a 1D or 2D tensor, but got {input.dim()}D (shape "
                           f"{list(input.shape)})")
    if not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError(f"{fname}: expected a tensor of floating point or complex values, got "
                           f"{str(input.dtype)}")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    x = input.unsqueeze(0) if input.dim() == 1 else input
    if center:
        pad = n_fft // 2
        if x.is_complex():  # the padding kernels are real-only: pad both parts
            x = _ops.complex(_ops.pad(x.real.unsqueeze(1), [pad, pad], pad_mode, None),
                             _ops.pad(x.imag.unsqueeze(1), [pad, pad], pad_mode, None)).squeeze(1)
        else:
            x = _ops.pad(x.unsqueeze(1), [pad, pad], pad_mode, None).squeeze(1)
    length = x.shape[-1]
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(f"{fname}: expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop_length <= 0:
        raise RuntimeError(f"{fname}: expected hop_length > 0, but got hop_length={hop_length}")
    if win_length <= 0 or win_length > n_fft:
        raise RuntimeError(f"{fname}: expected 0 < win_length <= n_fft, but got win_length={win_length}")
    w = _full_window(fname, window, win_length, n_fft, x)
    frames = x.unfold(-1, n_fft, hop_length)  # (B, n_frames, n_fft)
    frames = frames * w
    norm = 1 if normalized else 0
    onesided = (not complex_in) if onesided is None else onesided
    if frames.is_complex():
        if onesided:
            raise RuntimeError(f"{fname}: Cannot have onesided output if window or input is complex")
        out = _fft_c2c(frames, [2], norm, True)
    else:
        out = _fft_r2c(frames, [2], norm, onesided)
    out = out.transpose(1, 2)
    if input.dim() == 1:
        out = out.squeeze(0)
    if not return_complex:
        _warnings.warn("stft with return_complex=False is deprecated. In a future pytorch release, stft will "
                       "return complex tensors for all inputs, and return_complex=False will raise an error.")
        return _ops.view_as_real(out.contiguous())
    return out


def _overlap_add(frames, hop, total):
    """Sums frames (B, n_frames, n_fft) placed hop apart into (B, total)."""
    if frames.is_complex():  # index_add is real-only: add both parts
        return _ops.complex(_overlap_add(frames.real, hop, total), _overlap_add(frames.imag, hop, total))
    b, n_frames, n_fft = frames.shape
    idx = (_strata().arange(n_frames, device=frames.device).unsqueeze(1) * hop
           + _strata().arange(n_fft, device=frames.device).unsqueeze(0)).reshape([-1])
    y = _ops.zeros([b, total], dtype=frames.dtype, device=frames.device)
    return y.index_add(1, idx, frames.reshape([b, n_frames * n_fft]))


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """Inverse short-time Fourier transform (least-squares overlap-add, torch's algorithm)."""
    fname = "istft"
    _check_input(fname, input)
    if not input.is_complex():
        raise RuntimeError(f"{fname} requires a complex-valued input tensor, but got {_dtype_name(input.dtype)}")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"{fname}: expected a tensor with 2 or 3 dimensions of complex values, but got "
                           f"{input.dim()}D (shape {list(input.shape)})")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    x = input.unsqueeze(0) if input.dim() == 2 else input
    fft_size, n_frames = x.shape[1], x.shape[2]
    if onesided is None:
        onesided = fft_size != n_fft
    if onesided:
        if n_fft // 2 + 1 != fft_size:
            raise RuntimeError(f"{fname}: expected the frequency dimension (3rd to the last) of the input tensor "
                               f"to match n_fft / 2 + 1 when onesided=True, but got {fft_size}")
    elif n_fft != fft_size:
        raise RuntimeError(f"{fname}: expected the frequency dimension (3rd to the last) of the input tensor to "
                           f"match n_fft when onesided=False, but got {fft_size}")
    if not (0 < hop_length <= win_length):
        raise RuntimeError(f"{fname}: expected 0 < hop_length <= win_length")
    if not (0 < win_length <= n_fft):
        raise RuntimeError(f"{fname}: expected 0 < win_length <= n_fft")
    if n_frames < 1:
        raise RuntimeError(f"{fname}: expected at least one frame, but the input has shape {list(input.shape)}")
    w = _full_window(fname, window, win_length, n_fft, x)
    norm = 1 if normalized else 2
    x = x.transpose(1, 2)  # (B, n_frames, fft_size)
    if return_complex:
        if onesided:
            raise RuntimeError(f"{fname}: cannot have onesided output if return_complex is True")
        frames = _fft_c2c(x, [2], norm, False)
    else:
        if w.is_complex():
            raise RuntimeError(f"{fname}: Complex windows are incompatible with return_complex=False")
        if not onesided:
            x = x.narrow(-1, 0, n_fft // 2 + 1)
        frames = _fft_c2r(x, [2], norm, n_fft)
    total = n_fft + hop_length * (n_frames - 1)
    y = _overlap_add(frames * w, hop_length, total)
    w2 = (w * w) if not w.is_complex() else (w * w.conj()).real
    env = _overlap_add(w2.reshape([1, 1, n_fft]).expand([1, n_frames, n_fft]).contiguous(), hop_length, total)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = total - n_fft // 2 if center else total
    stop = min(end, total)
    y = y.narrow(1, start, max(stop - start, 0))
    env = env.narrow(1, start, max(stop - start, 0))
    if env.numel() and bool((env.abs().min() < 1e-11).item()):
        raise RuntimeError(f"{fname}(...): window overlap add min: {env.abs().min().item()}")
    y = y / env
    if end > total:
        _warnings.warn("The length of signal is shorter than the length parameter. Result is being padded with "
                       "zeros in the tail. Please check your center and hop_length settings.")
        y = _ops.pad(y, [0, end - total], "constant", 0.0)
    if input.dim() == 2:
        y = y.squeeze(0)
    return y


_C.Tensor.stft = stft
_C.Tensor.istft = istft
