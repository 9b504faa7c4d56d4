"""Op-database entries for the recurrent layers: none.

``RNN``/``LSTM``/``GRU`` and their cells are composites of registered ops
(``matmul``, ``sigmoid``, ``tanh``, ``relu``, slicing, ``stack``), so they
register no op of their own; they are tested against torch.nn with copied
state dicts in ``tests/test_nn_rnn.py``.
"""

ENTRIES: list = []
