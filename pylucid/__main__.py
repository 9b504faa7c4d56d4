"""``python -m pylucid train ...`` and the ``pylucid`` console script."""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    from .train import cli

    return cli(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    raise SystemExit(main())
