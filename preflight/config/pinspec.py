"""Version pins read in plain words: 'paddle>=2.6,<3' is a name and comparisons, and what is
wrong with one is said as an operator would say it ("'3..1' is not a version number"), not
in the packaging library's grammar terms. Pins that no version can satisfy together
(paddle>=3 and paddle<2) are refused before any host is reached."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Optional

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from preflight.config.errors import InputError
from preflight.model.policy import PIN_NAMES, Pin

OPERATORS = ("===", "~=", "==", "!=", ">=", "<=", ">", "<")  # longest first
_NAME = re.compile(r"\s*([A-Za-z][A-Za-z0-9_.-]*)\s*(.*)\Z", re.S)
EXAMPLE = "like paddle>=2.6,<3 or driver>=535"


def _version_problem(op: str, version: str) -> Optional[str]:
    """Why version cannot follow op, in plain words (None: it can)."""
    if version.endswith(".*"):
        if op not in ("==", "!="):
            return f"a wildcard ({version}) goes only with == or !="
        version = version[:-2]
    if not version:
        return f"{op} needs a version after it"
    try:
        v = Version(version)
    except InvalidVersion:
        return f"{version!r} is not a version number (like 2.6, 12.4 or 550.54.15)"
    if op == "~=" and len(v.release) < 2:
        return f"~= needs two parts or more (~={version}.0 means >={version}.0,=={version}.*)"
    return None


def parse_pin(text: str, where: str, fld: str = "require", line: Optional[int] = None) -> Pin:
    """Returns the pin of 'paddle>=2.6,<3'; raises InputError naming where it came from and,
    in plain words, what is wrong."""
    def bad(why: str) -> InputError:
        return InputError(where, f"{text!r}: {why}", field=fld, line=line)

    m = _NAME.match(text)
    if not m:
        raise bad(f"a pin is a name and comparisons, {EXAMPLE}")
    name, rest = m.group(1).lower(), m.group(2).strip()
    if name not in PIN_NAMES:
        raise bad(f"{name!r} is not something preflight pins (one of {', '.join(PIN_NAMES)})")
    if not rest:
        raise bad(f"pins nothing: add a comparison, {EXAMPLE}")
    for part in (p.strip() for p in rest.split(",")):
        op = next((o for o in OPERATORS if part.startswith(o)), None)
        if op is None:
            hint = " (== for equal)" if part.startswith("=") else ""
            raise bad(f"{part!r} does not start with a comparison: ==, !=, >=, <=, >, < or "
                      f"~={hint}")
        why = _version_problem(op, part[len(op):].strip())
        if why:
            raise bad(why)
    try:
        spec = SpecifierSet(rest.replace(" ", ""))
    except InvalidSpecifier:  # what the checks above did not foresee: still one line
        raise bad(f"not a version pin, {EXAMPLE}") from None
    return Pin(name, str(spec))


def _candidates(spec: SpecifierSet) -> list[Version]:
    """Versions at and just beside every bound of spec: if none satisfies it, no version
    does (each comparison is decided at its own bound, or just above or below it)."""
    out = [Version("0"), Version("999999")]
    for s in spec:
        text = s.version[:-2] if s.version.endswith(".*") else s.version
        v = Version(text)
        rel = ".".join(map(str, v.release))
        out += [v, Version(f"{rel}.0.0.0.1")]
        if v.release[-1] > 0:  # just below: 3.1 -> 3.0.999999
            below = (*v.release[:-1], v.release[-1] - 1, 999999)
            out.append(Version(".".join(map(str, below))))
    return out


def contradiction(pins: Sequence[Pin]) -> Optional[str]:
    """Says which pins no version can satisfy together (None: every name can be met)."""
    by_name: dict[str, list[Pin]] = {}
    for p in pins:
        by_name.setdefault(p.name, []).append(p)
    for name, mine in by_name.items():
        spec = SpecifierSet(",".join(p.spec for p in mine))
        if not any(spec.contains(v, prereleases=True) for v in _candidates(spec)):
            said = " and ".join(str(p) for p in mine)
            return f"{said}: no {name} version satisfies {'them' if len(mine) > 1 else 'it'}"
    return None
