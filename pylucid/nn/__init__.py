"""pylucid.nn: modules, layers, losses, init and utilities, built from public pylucid ops."""

from . import functional, init, utils  # noqa: F401
from .modules_core import *  # noqa: F401,F403
from .modules_conv import *  # noqa: F401,F403
from .modules_rnn import *  # noqa: F401,F403
from . import parallel  # noqa: F401,E402
from . import modules  # noqa: F401,E402
