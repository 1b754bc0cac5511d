"""The policy: a YAML file and the command line's flags -> Policy (one-line errors). Read like
the inventory (a repeated key refused, file:line:field in every error), and checked as a
whole: a warning threshold on the right side of its failure threshold, ratios within 0-1,
pins that some version can satisfy."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from preflight.common.literal import one_of
from preflight.config import container, yamlfile
from preflight.config.document import Fields
from preflight.config.errors import InputError
from preflight.config.pinspec import contradiction, parse_pin
from preflight.model.policy import (
    MODES,
    PS_MODEL_LIMITS,
    PS_MODES,
    SHAPE_KEYS,
    JobShape,
    Limits,
    Mode,
    Policy,
    PsMode,
    PsModel,
)

# (warn, fail) pairs of Limits: more is better for these (a fail threshold above its warning
# one would fail before it ever warned)...
AT_LEAST = (("shm_warn_mib", "shm_fail_mib"), ("tmp_warn_mib", "tmp_fail_mib"),
            ("nofile_warn", "nofile_fail"), ("link_warn_ratio", "link_fail_ratio"))
# ... and less is better for these.
AT_MOST = (("clock_skew_warn_s", "clock_skew_fail_s"),)
# Shares of something: from 0 to 1 (link ratios are of the cluster's median host).
# cpu_busy_ratio is not one: load over effective cores may pass 1 (an oversubscribed host).
FRACTIONS = ("link_warn_ratio", "link_fail_ratio", "busbw_link_ratio")


def parse_ports(items: Any, where: str, line: Optional[int] = None) -> tuple[int, ...]:
    """Returns the ports of [6070, "6070-6077", ...] or "6070-6077,6767"."""
    if isinstance(items, (str, int)):
        items = str(items).split(",")
    if not isinstance(items, list):
        raise InputError(where, "expected a list of ports or ranges", field="ports", line=line)
    out: list[int] = []
    for item in items:
        text = str(item).strip()
        lo, _, hi = text.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise InputError(where, f"{text!r} is not a port or a range a-b",
                             field="ports", line=line) from None
        if not (1 <= a <= b <= 65535) or b - a > 4096:
            raise InputError(where, f"{text!r}: ports are 1-65535, a range at most 4096 long",
                             field="ports", line=line)
        out.extend(range(a, b + 1))
    return tuple(sorted(set(out)))


def _limits(f: Fields) -> Limits:
    f.keys_within(set(Limits.__dataclass_fields__), "limit")
    for key in f.data:
        f.number(key)  # a non-negative number, or one line naming limits.<key>
    limits = Limits(**f.data)
    for key in FRACTIONS:
        if not 0 < getattr(limits, key) <= 1:
            f.fail(f"{getattr(limits, key)!r} is not a share from above 0 to 1 (0.75: 75%)",
                   key)
    if limits.cpu_busy_ratio <= 0:
        f.fail("0 would make every host too busy for a server: a load over effective cores "
               "above 0 (default 0.8)", "cpu_busy_ratio")
    if limits.link_loss_warn_pct > 100:
        f.fail(f"{limits.link_loss_warn_pct!r} is not a percentage (0 to 100)",
               "link_loss_warn_pct")
    for pairs, word in ((AT_LEAST, "below"), (AT_MOST, "above")):
        for warn, fail in pairs:
            w, x = getattr(limits, warn), getattr(limits, fail)
            if (w < x) if word == "below" else (w > x):
                # Name the key the file set (the other may be a default).
                key = warn if warn in f.data else fail
                f.fail(f"{warn} {w:g} is {word} {fail} {x:g}: hosts would fail before they "
                       "ever warned", key)
    return limits


POLICY_KEYS = {"mode", "ps_mode", "ps_model", "require", "files", "ports", "limits", "container",
               *SHAPE_KEYS}


def load_policy(path: str) -> Policy:
    """Returns the policy of a YAML file; raises InputError naming the file, line and field."""
    doc = yamlfile.read(path)
    if doc is None:  # an empty file: the defaults
        return Policy()
    if not isinstance(doc, dict):
        raise InputError(path, "expected a mapping")
    f = Fields(path, doc)
    f.keys_within(POLICY_KEYS)
    policy = Policy()
    if f.has("mode"):
        policy = replace(policy, mode=check_mode(doc["mode"], path, yamlfile.line_of(doc, "mode")))
    if f.has("ps_mode"):
        policy = replace(policy, ps_mode=check_ps_mode(doc["ps_mode"], path,
                                                       yamlfile.line_of(doc, "ps_mode")))
    if f.has("ps_model"):
        policy = replace(policy, ps_model=_ps_model(f.at("ps_model")))
    if f.has("require"):
        pins = f.strings("require", "a list of pins like 'paddle>=2.6,<3'")
        line = yamlfile.line_of(doc, "require")
        policy = replace(policy, pins=tuple(parse_pin(p, path, line=line) for p in pins))
        clash = contradiction(policy.pins)
        if clash:
            f.fail(clash, "require")
    if f.has("files"):
        policy = replace(policy, files=tuple(f.strings("files", "a list of file paths")))
    if f.has("ports"):
        policy = replace(policy, ports=parse_ports(doc["ports"], path,
                                                   yamlfile.line_of(doc, "ports")))
    if f.has("limits"):
        policy = replace(policy, limits=_limits(f.at("limits")))
    if f.has("container"):
        policy = replace(policy, container=container.layer(f.at("container")))
    sizes = {key: f.count(key) for key in SHAPE_KEYS if f.has(key)}
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


def check_mode(mode: Any, where: str, line: Optional[int] = None) -> Mode:
    try:
        return one_of(mode, MODES)
    except ValueError:
        raise InputError(where, f"{mode!r} is not a mode ({', '.join(MODES)})", field="mode",
                         line=line) from None


def _ps_model(f: Fields) -> PsModel:
    f.keys_within(set(PS_MODEL_LIMITS))
    return PsModel(**{k: f.count(k, 1, high) for k, high in PS_MODEL_LIMITS.items()
                      if f.has(k)})


def check_ps_mode(mode: Any, where: str, line: Optional[int] = None) -> PsMode:
    try:
        return one_of(mode, PS_MODES)
    except ValueError:
        why = (": Paddle's CPU builds crash in SendBarrierOp in sync PS (2.6.2, 3.0.0), so "
               "the PS round does not run it") if mode == "sync" else ""
        raise InputError(where, f"{mode!r} is not a PS mode preflight runs "
                         f"({', '.join(PS_MODES)}){why}", field="ps_mode", line=line) from None


def build(path: Optional[str], mode: Optional[str], requires: list[str], files: list[str],
          ports: Optional[str], shape: Optional[dict[str, Optional[int]]] = None,
          ps_mode: Optional[str] = None) -> Policy:
    """Returns the policy file's policy with the command line's flags applied on top."""
    policy = load_policy(path) if path else Policy()
    given = {k: v for k, v in (shape or {}).items() if v is not None}
    if given:
        policy = replace(policy, job=replace(policy.job, **given))
    if mode:
        policy = replace(policy, mode=check_mode(mode, "--mode"))
    if ps_mode:
        policy = replace(policy, ps_mode=check_ps_mode(ps_mode, "--ps-mode"))
    if requires:
        policy = replace(policy, pins=policy.pins + tuple(parse_pin(r, "--require")
                                                            for r in requires))
    clash = contradiction(policy.pins) if requires else None  # the file's own: checked above
    if clash:
        raise InputError("--require", clash, field="require")
    if files:
        policy = replace(policy, files=policy.files + tuple(files))
    if ports is not None:
        policy = replace(policy, ports=parse_ports(ports, "--ports"))
    _check_shape(policy, path)
    for f in policy.files:
        if f.startswith("-") or any(c in f for c in "\x00\n"):
            raise InputError("--file", f"{f!r} is not a usable path", field="files")
    return policy
