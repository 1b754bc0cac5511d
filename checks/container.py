"""The job's container is there on every host, starts, and is the same image everywhere:
another image under the same tag is another Paddle, CUDA and NCCL."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import compare, could_not_check, pass_others
from preflight.model.cluster import Cluster
from preflight.model.container import traits
from preflight.model.facts import ContainerFacts, SectionError
from preflight.model.findings import Finding, Status

NAME = "container"
ABOUT = r"""
Where the job runs in a container (`container:` in the policy or the inventory,
`--container-image`): the image is on every host, the container starts as the job would
start it, and its image ID (the config digest, the same however the image was loaded) is
the same on every host. Paddle, CUDA, cuDNN and NCCL are then read inside it.
"""
WHY = ("An image missing on a host is a pull when the job starts (minutes, or a hang with no "
       "registry) while the other ranks wait; another image under the same tag is another "
       "Paddle or NCCL, and the ranks disagree at the first collective.")
FIX = ("Load the one image on every host (`docker save` / `docker load`, or pull it by "
       "digest) and start the job by that reference")
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = ("the job runs in a container (--container-image or --container-name, or container: in "
           "the policy or the inventory)")


def check(cluster: Cluster) -> Iterator[Finding]:
    boxed = [(h, f) for h, f in cluster.probed() if f.container is not None]
    boxes = {h: f.container for h, f in boxed if isinstance(f.container, ContainerFacts)}
    yield from could_not_check(NAME, "the job's container", {
        h: f.container.message for h, f in boxed if isinstance(f.container, SectionError)})
    bad: list[Finding] = []
    ids = {}
    for host, c in boxes.items():
        if c.no_runtime is not None:
            bad.append(Finding(NAME, Status.COULD_NOT_CHECK, (host,), (
                f"{host}: could not check the job's container: the runtime {c.runtime} is "
                f"missing on this host ({c.no_runtime}): install it there, or put it on the "
                "PATH of the user preflight logs in as"), {"no_runtime": c.no_runtime}))
        elif not traits(c.runtime).inspects:  # nothing was started or read
            bad.append(Finding(NAME, Status.SKIP, (host,), (
                f"{host}: n/a: {c.runtime} has no inspect, its container shares the host's "
                "network, IPC and limits (checked on the host)"), {"runtime": c.runtime}))
        elif c.missing is not None and _no_access(c.missing):
            bad.append(Finding(NAME, Status.COULD_NOT_CHECK, (host,), (
                f"{host}: could not ask {c.runtime} for {c.subject} ({c.missing}): the user "
                "preflight logs in as needs the runtime the job uses (the docker group; for "
                "Podman, the same rootful or rootless store)"), {"missing": c.missing}))
        elif c.missing is not None and c.name is not None:
            bad.append(Finding(NAME, Status.FAIL, (host,), (
                f"{host}: {c.subject} is not running on this host ({c.missing}): start the "
                "job's container first, or check its image (image:)"), {"missing": c.missing}))
        elif c.missing is not None:
            bad.append(Finding(NAME, Status.FAIL, (host,), (
                f"{host}: {c.subject} is not on this host ({c.missing}): load it there "
                "before the job (docker/podman load, or pull it by digest); a pull when the "
                "job starts holds every other rank"), {"missing": c.missing}))
        elif c.error is not None:
            # Started as the job will be: the job's own start fails the same way.
            bad.append(Finding(NAME, Status.FAIL, (host,), (
                f"{host}: the job's container does not start from {c.subject}: "
                f"{c.runtime} says: {c.error}: the job's start would fail the same way; fix "
                "the options it is given (devices, mounts, limits) or the host"),
                {"error": c.error}))
        elif c.unread is not None:
            bad.append(Finding(NAME, Status.COULD_NOT_CHECK, (host,), (
                f"{host}: could not read the job's {c.subject}: {c.unread}"),
                {"unread": c.unread}))
        if c.image_id is not None:
            ids[host] = c.image_id
    yield from bad
    # The ID is the config digest: equal however the image was loaded (a repo digest is not).
    refs = {boxes[h].image or boxes[h].name for h in ids}
    label = f"image ID of {refs.pop()}" if len(refs) == 1 else "image ID"
    differ = compare(NAME, label, ids, show=lambda v: str(v)[:19])
    yield from differ
    started = {h: c.start_s for h, c in boxes.items() if c.start_s is not None}
    slowest = max(started.values(), default=None)
    yield from pass_others(
        NAME, [h for h in boxes if h in ids], [*bad, *differ],
        "the job's container: one image on {n} hosts"
        + (f", started in at most {slowest:.1f} s" if slowest is not None else ""),
        image_id=next(iter(ids.values()), None), start_s=started)


# What the runtime says when the user cannot reach it at all (Docker's socket, Podman's
# store): the image may well be there.
_ACCESS = ("permission denied", "cannot connect", "is the docker daemon running",
           "no such file or directory")


def _no_access(why: str) -> bool:
    return any(word in why.lower() for word in _ACCESS)
