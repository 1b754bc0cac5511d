"""`container:` as an inventory (defaults, per host), the policy or the command line give it
-> a ContainerLayer, each value checked once where it is written, with one-line errors naming
the file, host and field; the layers -> ContainerSpec. Layers merge key by key, the nearer
one winning: the command line, then the host, then the inventory's defaults, then the
policy; `image` and `name` replace each other (a host that names its running container runs
no image the defaults named), and a null takes back what a layer below gave (`shm_size:
null`: the runtime's default)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Optional, TypeVar

from preflight.common.literal import one_of
from preflight.config.document import Fields
from preflight.config.errors import InputError, shown
from preflight.model.container import (
    DEFAULT_RUNTIME,
    RUNTIME_TRAITS,
    ContainerLayer,
    ContainerSpec,
)

T = TypeVar("T", bound=str)
KEYS = {"runtime", "image", "name", "python", "gpus", "devices", "network", "ipc", "shm_size",
        "cpus", "cpuset", "memory", "ulimits", "mounts", "env"}
ULIMITS = ("core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile",
           "nproc", "rss", "rtprio", "rttime", "sigpending", "stack")
_SIZE = re.compile(r"^[0-9]+(\.[0-9]+)?[bkmgtBKMGT]?$")
_LIMIT = re.compile(r"^(-1|unlimited|[0-9]+)(:(-1|unlimited|[0-9]+))?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GPUS = re.compile(r"^(all|[A-Za-z0-9-]+(,[A-Za-z0-9-]+)*)$")
_CPUS = re.compile(r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)$")
_CPUSET = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")


def _word(f: Fields, key: str) -> Optional[str]:
    """A value that becomes one argument: a string, never option-like, no control bytes."""
    v = f.data.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        f.fail(f"expected a string, got {shown(v, 120)}", key)
    text = str(v)
    if not text or text.startswith("-") or any(ord(c) < 32 for c in text):
        f.fail(f"{text!r:.80} is not a usable value (empty, option-like or with control "
               "characters)", key)
    return text


def _words(f: Fields, key: str) -> tuple[str, ...]:
    v = f.data.get(key)
    if v is None:
        return ()
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list):
        f.fail("expected a list of strings", key)
    return tuple(str(_word(Fields(f.path, {key: x}, f.prefix, f.host, f.line), key))
                 for x in items)


def _pairs(f: Fields, key: str, check: Any) -> tuple[tuple[str, str], ...]:
    v = f.data.get(key)
    if v is None:
        return ()
    if not isinstance(v, dict):
        f.fail("expected a mapping", key)
    sub = Fields(f.path, v, f.field(key), f.host, f.line)
    return tuple((str(k), check(sub, str(k))) for k in v)


def _ulimit(f: Fields, name: str) -> str:
    _one_of(f, name, name, ULIMITS)
    v = f.data.get(name)
    text = str(v).strip() if isinstance(v, (int, str)) and not isinstance(v, bool) else ""
    if not _LIMIT.match(text):
        f.fail(f"{v!r:.40} is not a limit (a number, -1 or unlimited; soft:hard)", name)
    return text


def _env_value(f: Fields, name: str) -> str:
    if not _ENV_NAME.match(name):
        f.fail("not an environment variable's name", name)
    v = f.data.get(name)
    if isinstance(v, bool) or not isinstance(v, (str, int, float)) or \
            any(c in str(v) for c in "\x00\n"):
        f.fail(f"expected a string, got {shown(v, 120)}", name)
    return str(v)


def _one_of(f: Fields, value: Any, key: str, allowed: tuple[T, ...]) -> T:
    """value as one of allowed, or one line naming key."""
    try:
        return one_of(value, allowed)
    except ValueError as e:
        f.fail(str(e)[:200], key)


def layer(f: Fields) -> ContainerLayer:
    """One layer (the policy's, an inventory's defaults or host, the command line's): every
    value it gives checked where it is written, once; what it leaves out may come from
    another layer, and a key given as null takes back what a layer below gave."""
    f.keys_within(KEYS, "container key")
    data = f.data
    if data.get("image") is not None and data.get("name") is not None:
        f.fail("give the job's image (image:) or its running container (name:), not both")
    out: dict[str, Any] = {}
    if "runtime" in data:
        out["runtime"] = None if data["runtime"] is None else \
            _one_of(f, data["runtime"], "runtime", tuple(RUNTIME_TRAITS))
    for key in ("image", "name", "python", "network", "ipc"):
        if key in data:
            out[key] = _word(f, key)
    for key in ("shm_size", "memory"):
        if key in data:
            size = data[key]
            if size is not None and not _SIZE.match(str(size)):
                f.fail(f"{size!r:.40} is not a size (16g, 512m, 1073741824)", key)
            out[key] = _word(f, key)
    if "cpus" in data:
        cpus = data["cpus"]
        if cpus is not None and (isinstance(cpus, bool) or not _CPUS.match(str(cpus))
                                 or float(cpus) <= 0):
            f.fail(f"{cpus!r:.40} is not a number of cores (1.5, 8)", "cpus")
        out["cpus"] = _word(f, "cpus")
    if "cpuset" in data:
        cpuset = data["cpuset"]
        if cpuset is not None and not _CPUSET.match(str(cpuset)):
            f.fail(f"{cpuset!r:.40} is not a list of CPUs (0-7,16)", "cpuset")
        out["cpuset"] = _word(f, "cpuset")
    if "gpus" in data:
        gpus = _word(f, "gpus")
        if gpus is not None and not _GPUS.match(gpus):
            f.fail(f"{gpus!r:.60} is not all or a list of GPU indices or UUIDs", "gpus")
        out["gpus"] = gpus
    if "mounts" in data:
        mounts = _words(f, "mounts")
        for m in mounts:
            if ":" not in m:
                f.fail(f"{m!r:.80} is not SRC:DST[:OPTIONS]", "mounts")
        out["mounts"] = mounts
    if "devices" in data:
        out["devices"] = _words(f, "devices")
    if "ulimits" in data:
        out["ulimits"] = _pairs(f, "ulimits", _ulimit)
    if "env" in data:
        out["env"] = _pairs(f, "env", _env_value)
    return ContainerLayer(tuple(out.items()))


def merged(*layers: Optional[ContainerLayer]) -> ContainerLayer:
    """The layers' keys merged, a later layer winning; one that names an image or a running
    container replaces the other from the layers below it."""
    out: dict[str, Any] = {}
    for lay in layers:
        if lay is None:
            continue
        given = dict(lay.given)
        if "image" in given or "name" in given:
            out.pop("image", None)
            out.pop("name", None)
        out.update(given)
    return ContainerLayer(tuple(out.items()))


def spec_of(path: str, layers: Sequence[Optional[ContainerLayer]],
            host: Optional[str] = None) -> Optional[ContainerSpec]:
    """The container of the merged layers (None: the job runs on the host); an error names
    path, host and the field: a job's image or running container that no layer gives."""
    given = dict(merged(*layers).given)
    if not given:
        return None
    values = {k: v for k, v in given.items() if v is not None}  # a null took it back
    if values.get("image") is None and values.get("name") is None:
        Fields(path, {}, "container", host).fail(
            "give the job's image (image:) or its running container (name:)")
    return ContainerSpec(**{"runtime": DEFAULT_RUNTIME, "python": "python3", **values})


def parse(f: Fields) -> ContainerSpec:
    """The container of one complete mapping (a report's, read back)."""
    spec = spec_of(f.path, [layer(f)], f.host)
    if spec is None:
        f.fail("give the job's image (image:) or its running container (name:)")
    return spec


def as_mapping(spec: ContainerSpec) -> dict[str, Any]:
    """A spec as the container: mapping writes it (what parse reads back)."""
    out: dict[str, Any] = {"runtime": spec.runtime, "image": spec.image, "name": spec.name,
                           "python": spec.python, "gpus": spec.gpus,
                           "devices": list(spec.devices), "network": spec.network,
                           "ipc": spec.ipc, "shm_size": spec.shm_size, "cpus": spec.cpus,
                           "cpuset": spec.cpuset, "memory": spec.memory,
                           "ulimits": dict(spec.ulimits), "mounts": list(spec.mounts),
                           "env": dict(spec.env)}
    return {k: v for k, v in out.items() if v not in (None, [], {})}


def checked(spec: ContainerSpec, fail: Callable[[str, str], NoReturn],
            field: str) -> ContainerSpec:
    """spec (read back from a report) as the container: reader would have taken it; else
    fail(why, the field): a hand-edited report cannot slip an option into a command."""
    try:
        return parse(Fields("report", as_mapping(spec), "container"))
    except InputError as e:
        fail(str(e).split(": ", 1)[-1], field)
