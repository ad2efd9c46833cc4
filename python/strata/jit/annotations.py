"""strata.jit.annotations: the typing names TorchScript annotations use
(`from torch.jit.annotations import List, Tuple`), which are typing's own."""

from typing import Any, Dict, List, Optional, Tuple, Union  # noqa: F401


def _broadcasting_list(n):
    # torch's BroadcastingListN[T] means "a T or a list of N Ts"; outside
    # TorchScript only the annotation is read, so it is List[T].
    class _BroadcastingList:
        def __getitem__(self, types):
            return List[types]

        def __repr__(self):
            return f"BroadcastingList{n}"

    return _BroadcastingList()


BroadcastingList1, BroadcastingList2, BroadcastingList3 = (_broadcasting_list(n) for n in (1, 2, 3))

__all__ = ["Any", "Dict", "List", "Optional", "Tuple", "Union", "BroadcastingList1", "BroadcastingList2",
           "BroadcastingList3"]
