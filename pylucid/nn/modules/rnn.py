"""The recurrent layers, at PyTorch's module path ``torch.nn.modules.rnn``.

The classes are :mod:`pylucid.nn`'s own, so ``pylucid.nn.modules.rnn.X is pylucid.nn.X``.
"""

from ..modules_rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
