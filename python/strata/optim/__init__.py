"""strata.optim: optimizers and learning-rate schedulers (torch.optim)."""

from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam
from .adamw import AdamW
from .rmsprop import RMSprop
from .adagrad import Adagrad
from .adamax import Adamax
from .nadam import NAdam
from .radam import RAdam
from .adadelta import Adadelta
from .asgd import ASGD
from .rprop import Rprop
from .lbfgs import LBFGS
from .sparse_adam import SparseAdam
from . import lr_scheduler
from . import swa_utils

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "ASGD",
           "Rprop", "LBFGS", "SparseAdam", "lr_scheduler", "swa_utils"]
