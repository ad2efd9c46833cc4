"""strata.nn: neural-network building blocks (torch.nn)."""

from . import functional  # noqa: F401
from . import init  # noqa: F401
from .parameter import Parameter  # noqa: F401
from .modules import (  # noqa: F401
    Module, Sequential, ModuleList, ModuleDict, Identity, Linear, Bilinear, Conv1d, Conv2d, BatchNorm1d,
    BatchNorm2d, LayerNorm, RMSNorm, GroupNorm, Embedding, Dropout, Flatten, Unflatten, ReLU, GELU, SiLU, Tanh,
    Sigmoid, Softmax, LogSoftmax, LeakyReLU, MultiheadAttention, TransformerEncoderLayer, TransformerEncoder,
    L1Loss, MSELoss, NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss,
)

from . import attention, parallel  # noqa: E402,F401
from .parallel import DataParallel  # noqa: E402,F401

try:  # nn.utils is written separately and may not be merged yet
    from . import utils  # noqa: F401
except ImportError:
    pass
