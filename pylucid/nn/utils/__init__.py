"""pylucid.nn.utils (being written)."""
