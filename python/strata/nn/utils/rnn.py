"""Variable-length sequences for the recurrent layers (torch.nn.utils.rnn).

A PackedSequence stores the steps of a batch of sequences one after another, each step holding only the sequences
that are still running: sequences are sorted by decreasing length, so the rows of step t are the first
batch_sizes[t] sequences. The recurrent layers take that layout directly (their C++ time loop shrinks the batch
as sequences end), which is what makes packing worth it.
"""

from collections import namedtuple

from ... import _C
from ... import arange, as_tensor, cat, empty_like, full, int64, stack

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]

Tensor = _C.Tensor

_PackedSequenceBase = namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


def invert_permutation(permutation):
    """The permutation that undoes `permutation` (None stays None)."""
    if permutation is None:
        return None
    out = empty_like(permutation)
    out.scatter_(0, permutation, arange(0, permutation.numel(), dtype=permutation.dtype, device=permutation.device))
    return out


class PackedSequence(_PackedSequenceBase):
    """data (sum(batch_sizes), *) holds the steps back to back; batch_sizes (int64, on the CPU) the number of
    sequences running at each step; sorted_indices/unsorted_indices map the original batch order to the sorted one
    and back (None when the sequences came sorted). Build it with pack_padded_sequence or pack_sequence."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            # PackedSequence(data, batch_sizes) may also be written PackedSequence((data, batch_sizes)).
            if isinstance(data, (list, tuple)) and len(data) == 2:
                data, batch_sizes = data
            else:
                raise TypeError("PackedSequence: expected (data, batch_sizes, ...), got data only; build packed "
                                "sequences with pack_padded_sequence or pack_sequence")
        if batch_sizes.device.type != "cpu":
            raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence should never be "
                             "created manually. They should be instantiated by functions like pack_sequence and "
                             "pack_padded_sequences in nn.utils.rnn.")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """The sequence with data moved/cast like Tensor.to; the indices follow data's device, batch_sizes stays
        on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        dev = data.device
        si = None if self.sorted_indices is None else self.sorted_indices.to(dev)
        ui = None if self.unsorted_indices is None else self.unsorted_indices.to(dev)
        return type(self)(data, self.batch_sizes, si, ui)

    def cpu(self, *args, **kwargs):
        return self.to("cpu")

    def cuda(self, *args, **kwargs):
        return self.to("cuda")

    def double(self):
        return self.to(dtype=_dtype("float64"))

    def float(self):
        return self.to(dtype=_dtype("float32"))

    def half(self):
        return self.to(dtype=_dtype("float16"))

    def bfloat16(self):
        return self.to(dtype=_dtype("bfloat16"))

    def long(self):
        return self.to(dtype=_dtype("int64"))

    def int(self):
        return self.to(dtype=_dtype("int32"))

    def short(self):
        return self.to(dtype=_dtype("int16"))

    def char(self):
        return self.to(dtype=_dtype("int8"))

    def byte(self):
        return self.to(dtype=_dtype("uint8"))

    @property
    def is_cuda(self):
        return self.data.device.type == "cuda"

    def is_pinned(self):
        return False


def _dtype(name):
    import strata

    return getattr(strata, name)


def _lengths_tensor(lengths):
    if isinstance(lengths, Tensor):
        if lengths.device.type != "cpu":
            raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got 1D "
                               f"{lengths.device.type} {lengths.dtype} tensor")
        return lengths.to(int64)
    return as_tensor(lengths, dtype=int64)


def _step_mask(lengths, steps):
    """(steps, batch) bool: which sequences (sorted by decreasing length) are running at each step."""
    return arange(0, steps, dtype=int64).unsqueeze(1) < lengths.unsqueeze(0)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences with the given lengths."""
    lengths = _lengths_tensor(lengths)
    if lengths.dim() != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D tensor, but got a {lengths.dim()}D tensor")
    if enforce_sorted:
        if lengths.numel() > 1 and bool((lengths[1:] > lengths[:-1]).any()):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        lengths, sorted_indices = lengths.sort(descending=True)
        sorted_indices = sorted_indices.to(input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if batch_first:
        input = input.transpose(0, 1)
    if input.dim() < 2:
        raise RuntimeError(f"pack_padded_sequence: expected a padded input of at least 2 dimensions, got "
                           f"{input.dim()}D")
    batch = input.size(1)
    if lengths.numel() != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {lengths.numel()} "
                           f"(batch_size={batch})")
    if batch == 0 or int(lengths[-1]) <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    steps = int(lengths[0])
    if steps > input.size(0):
        raise RuntimeError(f"pack_padded_sequence: a length ({steps}) exceeds the padded sequence length "
                           f"({input.size(0)})")
    mask = _step_mask(lengths, steps)
    batch_sizes = mask.sum(1)
    # Row-major boolean selection takes step by step, each step's running sequences in order: the packed layout.
    data = input[:steps][mask.to(input.device)]
    return PackedSequence(data, batch_sizes, sorted_indices, invert_permutation(sorted_indices))


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undoes pack_padded_sequence: (padded (T, B, *) or (B, T, *), lengths in the original batch order)."""
    data, batch_sizes = sequence.data, sequence.batch_sizes
    steps = batch_sizes.numel()
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
    else:
        total_length = steps
    batch = int(batch_sizes[0]) if steps else 0
    # lengths[b] = the number of steps that still had sequence b running.
    lengths = (batch_sizes.unsqueeze(0) > arange(0, batch, dtype=int64).unsqueeze(1)).sum(1)
    padded = full((total_length, batch) + tuple(data.shape[1:]), padding_value, dtype=data.dtype,
                  device=data.device)
    if steps:
        padded[:steps][_step_mask(lengths, steps).to(data.device)] = data
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.cpu()]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks tensors of shape (L_i, *) into (max L, B, *) (or (B, max L, *)), padding each on padding_side."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    rest = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != rest:
            raise RuntimeError(f"pad_sequence: all sequences must have the same trailing dimensions, got "
                               f"{tuple(sequences[0].shape)} and {tuple(s.shape)}")
    longest = max(s.size(0) for s in sequences)
    rows = []
    for s in sequences:
        missing = longest - s.size(0)
        if missing:
            pad = full((missing,) + rest, padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad]) if padding_side == "right" else cat([pad, s])
        rows.append(s)
    return stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences (L_i, *) of a padded batch (right padding)."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(lengths)]


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of tensors (L_i, *); with enforce_sorted they must come longest first."""
    lengths = as_tensor([s.size(0) for s in sequences], dtype=int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of tensors a PackedSequence was packed from, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
