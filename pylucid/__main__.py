"""``python -m pylucid train ...``, ``python -m pylucid launch -n N script.py ...``: the ``pylucid`` script."""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); the exit status (see ``pylucid.train.cli``)."""
    try:
        from .train import EXIT_INTERRUPTED, cli
    except KeyboardInterrupt:  # Ctrl-C while the framework is still importing
        print("pylucid: interrupted", file=sys.stderr)
        return 130
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["launch"]:
        from .distributed.run import main as launch

        return launch(argv[1:], prog="pylucid launch")
    try:
        return cli(argv)
    except KeyboardInterrupt:
        print("pylucid: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
