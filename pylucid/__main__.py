"""``python -m pylucid train ...`` and the ``pylucid`` console script."""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); the exit status (see ``pylucid.train.cli``)."""
    try:
        from .train import EXIT_INTERRUPTED, cli
    except KeyboardInterrupt:  # Ctrl-C while the framework is still importing
        print("pylucid: interrupted", file=sys.stderr)
        return 130
    try:
        return cli(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        print("pylucid: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
