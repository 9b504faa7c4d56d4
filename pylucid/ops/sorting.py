"""Op family module (being written)."""

__all__: list = []
