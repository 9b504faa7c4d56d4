"""Op-database entries for random sampling: none. The samplers (``normal``, ``bernoulli``,
``multinomial``, ``poisson``, ``Tensor.uniform_`` ...) are not registered ops (a draw has no
backward and nothing to compare against PyTorch value for value); their distribution,
reproducibility and generator tests live in tests/test_random.py."""

ENTRIES: list = []
