"""strata.nn.modules: the layer classes (torch.nn.modules)."""

from .module import Module, RemovableHandle  # noqa: F401
from . import batchnorm  # noqa: F401  (torch.nn.modules.batchnorm's import path)
from .container import Sequential, ModuleList, ModuleDict  # noqa: F401
from .linear import Identity, Linear, Bilinear, NonDynamicallyQuantizableLinear  # noqa: F401
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from .normalization import (  # noqa: F401
    BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm, LayerNorm, RMSNorm, GroupNorm)
from .sparse import Embedding  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .flatten import Flatten, Unflatten  # noqa: F401
from .activation import (  # noqa: F401
    ReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax, LeakyReLU, MultiheadAttention)
from .loss import L1Loss, MSELoss, NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss  # noqa: F401
from .transformer import TransformerEncoderLayer, TransformerEncoder  # noqa: F401
from .pooling import (  # noqa: F401
    MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, AdaptiveAvgPool1d, AdaptiveAvgPool2d,
    AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, MaxUnpool1d, MaxUnpool2d,
    MaxUnpool3d, LPPool1d, LPPool2d, LPPool3d)
from .upsampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d  # noqa: F401
from .padding import (  # noqa: F401
    ZeroPad1d, ZeroPad2d, ZeroPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d, ReflectionPad2d,
    ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, CircularPad1d, CircularPad2d,
    CircularPad3d)
from .pixelshuffle import PixelShuffle, PixelUnshuffle, ChannelShuffle  # noqa: F401
from .fold import Fold, Unfold  # noqa: F401
from .embedding_bag import EmbeddingBag  # noqa: F401
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell  # noqa: F401
from .transformer import (  # noqa: F401
    TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, TransformerDecoder, Transformer)
from .loss_more import (  # noqa: F401
    KLDivLoss, SmoothL1Loss, HuberLoss, CosineEmbeddingLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
    MarginRankingLoss, PoissonNLLLoss, GaussianNLLLoss, MultiLabelSoftMarginLoss, MultiLabelMarginLoss,
    MultiMarginLoss, HingeEmbeddingLoss, SoftMarginLoss, CTCLoss)
from .activation_more import (  # noqa: F401
    ELU, SELU, CELU, GLU, Mish, Hardswish, Hardsigmoid, Hardtanh, ReLU6, PReLU, Softplus, Softsign, Softshrink,
    Hardshrink, Tanhshrink, Threshold, RReLU, LogSigmoid, Softmin, Softmax2d, CosineSimilarity, PairwiseDistance)
from .dropout_more import Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout  # noqa: F401
from .instancenorm import (  # noqa: F401
    InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm, CrossMapLRN2d)
from .container_more import ParameterList, ParameterDict  # noqa: F401
from .lazy import LazyLinear, UninitializedParameter, LazyModuleMixin  # noqa: F401
