"""An argument parser whose errors are one line, like every other error of preflight: the
message, a "did you mean" where a choice or an option was misspelt, and where to look (the
subcommand's --help), instead of argparse's usage block with the message last."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, Optional

EXIT_USAGE = 2
_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")


def _closest(word: str, candidates: Iterable[str]) -> Optional[str]:
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


def _with_suggestion(message: str) -> str:
    """Argparse's "invalid choice: 'x' (choose from 'a', 'b', ...)" as "invalid choice: 'x'
    (did you mean 'a'?)" where one is close; the whole list only where none is."""
    m = _CHOICE.search(message)
    if not m:
        return message
    choices = re.findall(r"'([^']*)'", m.group(2))
    near = _closest(m.group(1), choices)
    if near is None:
        return message
    return message[:m.start()] + f"invalid choice: '{m.group(1)}' (did you mean '{near}'?)"


class OneLineParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose error() writes one line to stderr and exits 2; its
    subcommands' parsers are of this class too (argparse makes them of the parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {_with_suggestion(message)} "
                              f"(see {self.prog} --help)\n")

    def parse_args(self, args: Optional[Sequence[str]] = None,  # type: ignore[override]
                   namespace: Optional[argparse.Namespace] = None) -> argparse.Namespace:
        """As argparse's, except that an unknown option is said by the subcommand it was given
        to, with the closest option that subcommand has."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            sub = self._subcommand(ns)
            unknown = extras[0]
            hint = ""
            if unknown.startswith("-"):
                # Compared without the dashes, which every option shares.
                options = {o.lstrip("-"): o for o in sub._option_string_actions}
                near = _closest(unknown.split("=", 1)[0].lstrip("-"), options)
                hint = f" (did you mean {options[near]}?)" if near else ""
            sub.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return ns

    def _subcommand(self, ns: argparse.Namespace) -> OneLineParser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen: Any = action.choices.get(getattr(ns, action.dest, None) or "")
                if isinstance(chosen, OneLineParser):
                    return chosen
        return self
