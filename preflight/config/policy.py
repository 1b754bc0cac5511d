"""The policy: a YAML file and the command line's flags -> Policy (one-line errors)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from preflight.config.errors import InputError, read_input
from preflight.model.policy import MODES, PIN_NAMES, SHAPE_KEYS, JobShape, Limits, Pin, Policy


def parse_pin(text: str, where: str, fld: str = "require") -> Pin:
    """Returns the pin of 'paddle>=2.6,<3'; raises InputError naming where it came from."""
    try:
        req = Requirement(text)
    except InvalidRequirement as e:
        why = str(e).splitlines()[0]  # packaging adds a caret diagram on more lines
        raise InputError(where, f"{text!r} is not a version pin like 'paddle>=2.6,<3': {why}",
                         field=fld) from None
    name = req.name.lower()
    if name not in PIN_NAMES or req.extras or req.url or req.marker:
        raise InputError(where, f"{text!r}: pins name one of {', '.join(PIN_NAMES)}",
                         field=fld)
    return Pin(name, str(req.specifier))


def parse_ports(items: Any, where: str) -> tuple[int, ...]:
    """Returns the ports of [6070, "6070-6077", ...] or "6070-6077,6767"."""
    if isinstance(items, (str, int)):
        items = str(items).split(",")
    if not isinstance(items, list):
        raise InputError(where, "expected a list of ports or ranges", field="ports")
    out: list[int] = []
    for item in items:
        text = str(item).strip()
        lo, _, hi = text.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise InputError(where, f"{text!r} is not a port or a range a-b",
                             field="ports") from None
        if not (1 <= a <= b <= 65535) or b - a > 4096:
            raise InputError(where, f"{text!r}: ports are 1-65535, a range at most 4096 long",
                             field="ports")
        out.extend(range(a, b + 1))
    return tuple(sorted(set(out)))


def _limits(raw: Any, where: str) -> Limits:
    if not isinstance(raw, dict):
        raise InputError(where, "expected a mapping", field="limits")
    known = {f for f in Limits.__dataclass_fields__}
    values: dict[str, Any] = {}
    for k, v in raw.items():
        if k not in known:
            raise InputError(where, f"unknown limit (known: {', '.join(sorted(known))})",
                             field=f"limits.{k}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise InputError(where, f"{v!r} is not a non-negative number", field=f"limits.{k}")
        values[k] = v
    return Limits(**values)


POLICY_KEYS = {"mode", "require", "files", "ports", "limits", *SHAPE_KEYS}


def load_policy(path: str) -> Policy:
    """Returns the policy of a YAML file; raises InputError naming the file and field."""
    text = read_input(path)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(path, f"invalid YAML: {getattr(e, 'problem', None) or e}",
                         line=mark.line + 1 if mark else None) from None
    doc = doc or {}
    if not isinstance(doc, dict):
        raise InputError(path, "expected a mapping")
    for key in doc:
        if key not in POLICY_KEYS:
            raise InputError(path, f"unknown key (allowed: {', '.join(sorted(POLICY_KEYS))})",
                             field=str(key))
    policy = Policy()
    if "mode" in doc:
        policy = replace(policy, mode=check_mode(doc["mode"], path))
    if "require" in doc:
        pins = doc["require"]
        if not isinstance(pins, list) or not all(isinstance(p, str) for p in pins):
            raise InputError(path, "expected a list of pins like 'paddle>=2.6,<3'",
                             field="require")
        policy = replace(policy, pins=tuple(parse_pin(p, path) for p in pins))
    if "files" in doc:
        files = doc["files"]
        if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
            raise InputError(path, "expected a list of file paths", field="files")
        policy = replace(policy, files=tuple(files))
    if "ports" in doc:
        policy = replace(policy, ports=parse_ports(doc["ports"], path))
    if "limits" in doc:
        policy = replace(policy, limits=_limits(doc["limits"], path))
    sizes = {}
    for key in SHAPE_KEYS:
        if key in doc:
            v = doc[key]
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 4096:
                raise InputError(path, f"{v!r} is not a count from 1 to 4096", field=key)
            sizes[key] = v
    return replace(policy, job=JobShape(**sizes))


def _check_shape(policy: Policy, path: Optional[str]) -> None:
    """Refuses sizes that mean nothing in the job's mode, naming the flag."""
    job, where = policy.job, path or "command line"
    wrong = (("server_num", "trainer_num") if policy.mode == "collective"
             else ("nnodes", "nproc_per_node"))
    for key in wrong:
        if getattr(job, key) is not None:
            raise InputError(where, f"{key} does not apply to mode {policy.mode} (collective: "
                             "nnodes, nproc_per_node; ps: server_num, trainer_num)", field=key)


def check_mode(mode: Any, where: str) -> str:
    if mode not in MODES:
        raise InputError(where, f"{mode!r} is not a mode ({', '.join(MODES)})", field="mode")
    return str(mode)


def build(path: Optional[str], mode: Optional[str], requires: list[str], files: list[str],
          ports: Optional[str], shape: Optional[dict[str, Optional[int]]] = None) -> Policy:
    """Returns the policy file's policy with the command line's flags applied on top."""
    policy = load_policy(path) if path else Policy()
    given = {k: v for k, v in (shape or {}).items() if v is not None}
    if given:
        policy = replace(policy, job=replace(policy.job, **given))
    if mode:
        policy = replace(policy, mode=check_mode(mode, "--mode"))
    if requires:
        policy = replace(policy, pins=policy.pins + tuple(parse_pin(r, "--require")
                                                            for r in requires))
    if files:
        policy = replace(policy, files=policy.files + tuple(files))
    if ports is not None:
        policy = replace(policy, ports=parse_ports(ports, "--ports"))
    _check_shape(policy, path)
    for f in policy.files:
        if f.startswith("-") or any(c in f for c in "\x00\n"):
            raise InputError("--file", f"{f!r} is not a usable path", field="files")
    return policy
