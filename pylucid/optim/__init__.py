"""pylucid.optim: optimizers and learning-rate schedulers, built from public pylucid ops.

Every optimizer follows PyTorch's update formulas (its single-tensor
implementations) and state-dict layout; see ``docs/semantics/optim.md`` for
the few deviations.
"""

from . import lr_scheduler  # noqa: F401
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer, register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "LBFGS",
           "lr_scheduler", "register_optimizer_step_pre_hook", "register_optimizer_step_post_hook"]
