"""pylucid.nn.init (being written)."""
