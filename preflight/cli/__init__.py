"""The command line: arguments -> a subcommand -> its exit code; and the one map from an
error to an exit code (2 bad input, 3 internal error, 130 interrupted).

- args: the parser and its subcommands; values: the types of their values
- commands: each subcommand, from its flags to typed options, a run and its exit code;
  watchcmd: the watch's, and the report of a watch's log
"""

from __future__ import annotations

import logging
import signal
import sys
import traceback
from collections.abc import Sequence
from types import FrameType
from typing import Optional

from preflight.cli.args import build_parser
from preflight.cli.commands import COMMANDS, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE
from preflight.common.safewrite import UnsafeWrite
from preflight.common.visible import visible
from preflight.config.errors import InputError, UsageError


def _raise_interrupt(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)  # exits 2 with argparse's own one-line error
    args.argv = argv  # the results log keeps the command line: `report LOG` re-reads it
    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else
                        logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if args.command == "demo":
            from preflight.testing.demo import run_demo

            return run_demo(args.hosts, args.reports)
        return COMMANDS[args.command](args)
    except (InputError, UsageError, UnsafeWrite) as e:
        print(f"preflight: error: {visible(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("preflight: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug: say so in one line, with where, not a bare traceback
        if getattr(args, "verbose", False):
            # The traceback, and still exit 3: a traceback left to Python exits 1, which is
            # NO-GO's code to a gate that reads it.
            traceback.print_exc()
            return EXIT_INTERNAL
        print(f"preflight: internal error: {type(e).__name__}: {visible(str(e))} (run with -v "
              f"for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
