"""`container:` as an inventory (defaults, per host), the policy or the command line give it
-> ContainerSpec, with one-line errors naming the file, host and field. Layers merge key by
key, the nearer one winning: the command line, then the host, then the inventory's defaults,
then the policy; `image` and `name` replace each other (a host that names its running
container runs no image the defaults named), and a null takes back what a layer below gave
(`shm_size: null`: the runtime's default)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, Optional, TypeVar

from preflight.common.literal import one_of
from preflight.config.document import Fields
from preflight.config.errors import InputError
from preflight.model.container import RUNTIMES, ContainerSpec

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


def layered(*layers: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """The layers' keys merged, a later layer winning; one that names an image or a running
    container replaces the other from the layers below it."""
    out: dict[str, Any] = {}
    for layer in layers:
        if not layer:
            continue
        if "image" in layer or "name" in layer:
            out.pop("image", None)
            out.pop("name", None)
        out.update(layer)
    return out


def _word(f: Fields, key: str) -> Optional[str]:
    """A value that becomes one argument: a string, never option-like, no control bytes."""
    v = f.data.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        f.fail(f"expected a string, got {v!r}"[:160], key)
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
        f.fail(f"expected a string, got {v!r}"[:160], name)
    return str(v)


def _one_of(f: Fields, value: Any, key: str, allowed: tuple[T, ...]) -> T:
    """value as one of allowed, or one line naming key."""
    try:
        return one_of(value, allowed)
    except ValueError as e:
        f.fail(str(e)[:200], key)


def layer(f: Fields) -> dict[str, Any]:
    """One layer (a policy's, an inventory's defaults or host), every value it gives checked
    where it is written; what it leaves out may come from another layer."""
    parse(f, complete=False)
    return dict(f.data)


def parse(f: Fields, complete: bool = True) -> ContainerSpec:
    """The container of f's mapping (the layers already merged); complete False: a layer,
    whose image may come from another."""
    f.keys_within(KEYS, "container key")
    rt = _one_of(f, f.data.get("runtime", "docker"), "runtime", RUNTIMES)
    image, name = _word(f, "image"), _word(f, "name")
    if image is not None and name is not None:
        f.fail("give the job's image (image:) or its running container (name:), not both")
    if complete and image is None and name is None:
        f.fail("give the job's image (image:) or its running container (name:)")
    for key in ("shm_size", "memory"):
        size = f.data.get(key)
        if size is not None and not _SIZE.match(str(size)):
            f.fail(f"{size!r:.40} is not a size (16g, 512m, 1073741824)", key)
    cpus = f.data.get("cpus")
    if cpus is not None and (isinstance(cpus, bool) or not _CPUS.match(str(cpus))
                             or float(cpus) <= 0):
        f.fail(f"{cpus!r:.40} is not a number of cores (1.5, 8)", "cpus")
    cpuset = f.data.get("cpuset")
    if cpuset is not None and not _CPUSET.match(str(cpuset)):
        f.fail(f"{cpuset!r:.40} is not a list of CPUs (0-7,16)", "cpuset")
    gpus = _word(f, "gpus")
    if gpus is not None and not _GPUS.match(gpus):
        f.fail(f"{gpus!r:.60} is not all or a list of GPU indices or UUIDs", "gpus")
    mounts = _words(f, "mounts")
    for m in mounts:
        if ":" not in m:
            f.fail(f"{m!r:.80} is not SRC:DST[:OPTIONS]", "mounts")
    return ContainerSpec(
        runtime=rt, image=image, name=name, python=_word(f, "python") or "python3",
        gpus=gpus, devices=_words(f, "devices"), network=_word(f, "network"),
        ipc=_word(f, "ipc"), shm_size=_word(f, "shm_size"), cpus=_word(f, "cpus"),
        cpuset=_word(f, "cpuset"), memory=_word(f, "memory"),
        ulimits=_pairs(f, "ulimits", _ulimit), mounts=mounts,
        env=_pairs(f, "env", _env_value))


def spec_of(path: str, layers: list[Optional[Mapping[str, Any]]],
            host: Optional[str] = None) -> Optional[ContainerSpec]:
    """The container of the merged layers (None: the job runs on the host); an error names
    path, host and the field container.KEY."""
    merged = layered(*layers)
    return parse(Fields(path, merged, "container", host)) if merged else None


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
