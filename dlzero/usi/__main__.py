"""`python -m dlzero.usi [--model PATH] ...`: the USI engine without the rest of the CLI.

GUIs launch one executable with no arguments per engine; this entry point only imports what the
USI loop needs, so it starts faster than `dlzero usi` and works in a minimal install.
"""

from __future__ import annotations

import argparse
import sys

from dlzero.commands import usi


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlzero.usi")
    usi.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["usi", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
