"""strata.optim: optimizers and learning-rate schedulers (torch.optim)."""

from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam
from .adamw import AdamW
from .rmsprop import RMSprop
from .adagrad import Adagrad
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]

# A torch name missing here raises "not implemented yet" (strata/_missing.py).
from .._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)
