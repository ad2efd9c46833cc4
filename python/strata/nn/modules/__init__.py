"""strata.nn.modules: the layer classes (torch.nn.modules)."""

from .module import Module, RemovableHandle  # noqa: F401
from .container import Sequential, ModuleList, ModuleDict  # noqa: F401
from .linear import Identity, Linear, Bilinear, NonDynamicallyQuantizableLinear  # noqa: F401
from .conv import Conv1d, Conv2d  # noqa: F401
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm, GroupNorm  # noqa: F401
from .sparse import Embedding  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .flatten import Flatten, Unflatten  # noqa: F401
from .activation import (  # noqa: F401
    ReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax, LeakyReLU, MultiheadAttention)
from .loss import L1Loss, MSELoss, NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss  # noqa: F401
from .transformer import TransformerEncoderLayer, TransformerEncoder  # noqa: F401
from .loss_more import (  # noqa: F401
    KLDivLoss, SmoothL1Loss, HuberLoss, CosineEmbeddingLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
    MarginRankingLoss, PoissonNLLLoss, GaussianNLLLoss, MultiLabelSoftMarginLoss, MultiLabelMarginLoss,
    MultiMarginLoss, HingeEmbeddingLoss, SoftMarginLoss, CTCLoss)
