"""``pylucid.nn.modules``: the layers at PyTorch's module paths (``torch.nn.modules.rnn.LSTM``, ...).

Code written for PyTorch imports layers and their base classes from these paths
(``from torch.nn.modules.loss import _Loss``, ``torch.nn.modules.batchnorm._BatchNorm``,
``from torch.nn.modules.utils import _pair``). Each submodule re-exports pylucid's own classes, so
``pylucid.nn.modules.linear.Linear is pylucid.nn.Linear``; only the names pylucid has are there.

>>> import pylucid
>>> from pylucid.nn.modules.rnn import LSTM
>>> LSTM is pylucid.nn.LSTM
True
"""

from . import (  # noqa: F401
    activation, batchnorm, channelshuffle, container, conv, distance, dropout, flatten, fold, instancenorm, linear,
    loss, module, normalization, padding, pixelshuffle, pooling, rnn, sparse, transformer, upsampling, utils
)
from .activation import *  # noqa: F401,F403
from .batchnorm import *  # noqa: F401,F403
from .channelshuffle import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .fold import *  # noqa: F401,F403
from .instancenorm import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .module import Module  # noqa: F401
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pixelshuffle import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from .upsampling import *  # noqa: F401,F403
