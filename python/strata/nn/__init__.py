"""strata.nn: neural-network building blocks (torch.nn)."""

from . import functional  # noqa: F401
from . import init  # noqa: F401
from .parameter import Parameter  # noqa: F401
from .modules import (  # noqa: F401
    Module, Sequential, ModuleList, ModuleDict, Identity, Linear, Bilinear, Conv1d, Conv2d, BatchNorm1d,
    BatchNorm2d, BatchNorm3d, SyncBatchNorm, LayerNorm, RMSNorm, GroupNorm, Embedding, Dropout, Flatten, Unflatten,
    ReLU, GELU, SiLU, Tanh,
    Sigmoid, Softmax, LogSoftmax, LeakyReLU, MultiheadAttention, TransformerEncoderLayer, TransformerEncoder,
    L1Loss, MSELoss, NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss,
)
from .modules import (  # noqa: F401  (pooling, transposed/3-D convolution, upsampling, padding, shuffles, fold)
    Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d,
    AvgPool2d, AvgPool3d, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
    AdaptiveMaxPool2d, AdaptiveMaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d, LPPool1d, LPPool2d, LPPool3d,
    Upsample, UpsamplingNearest2d, UpsamplingBilinear2d, ZeroPad1d, ZeroPad2d, ZeroPad3d, ConstantPad1d,
    ConstantPad2d, ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
    ReplicationPad2d, ReplicationPad3d, CircularPad1d, CircularPad2d, CircularPad3d, PixelShuffle,
    PixelUnshuffle, ChannelShuffle, Fold, Unfold, EmbeddingBag,
)

from . import attention, parallel  # noqa: E402,F401
from .parallel import DataParallel  # noqa: E402,F401
from .modules import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell  # noqa: F401
from .modules.loss_more import (  # noqa: F401
    KLDivLoss, SmoothL1Loss, HuberLoss, CosineEmbeddingLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
    MarginRankingLoss, PoissonNLLLoss, GaussianNLLLoss, MultiLabelSoftMarginLoss, MultiLabelMarginLoss,
    MultiMarginLoss, HingeEmbeddingLoss, SoftMarginLoss, CTCLoss)
from .modules.transformer import TransformerDecoderLayer, TransformerDecoder, Transformer  # noqa: F401
from .modules.activation_more import (  # noqa: F401
    ELU, SELU, CELU, GLU, Mish, Hardswish, Hardsigmoid, Hardtanh, ReLU6, PReLU, Softplus, Softsign, Softshrink,
    Hardshrink, Tanhshrink, Threshold, RReLU, LogSigmoid, Softmin, Softmax2d, CosineSimilarity, PairwiseDistance)
from .modules.dropout_more import Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout  # noqa: F401
from .modules.instancenorm import (  # noqa: F401
    InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm, CrossMapLRN2d)
from .modules.container_more import ParameterList, ParameterDict  # noqa: F401
from .modules.lazy import LazyLinear, UninitializedParameter  # noqa: F401

try:  # nn.utils is written separately and may not be merged yet
    from . import utils  # noqa: F401
except ImportError:
    pass
from .modules.adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: E402,F401
