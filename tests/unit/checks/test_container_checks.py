"""The checks of the job's container, on facts: its image everywhere and one image ID, its
network, GPUs and RDMA devices, and the limits and /dev/shm it really runs with."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from support import cluster, gpu, same

from preflight.checks import (
    container,
    container_gpus,
    container_network,
    container_rdma,
    memlock,
    nofile,
    shm,
)
from preflight.model import facts as F
from preflight.model.findings import Status
from preflight.model.policy import Limits, Policy

GIB = 1 << 30
IMAGE = "sha256:09158d32aa" + "0" * 54
GOOD = F.ContainerFacts(
    runtime="podman", image="localhost/paddle:3.3.1", image_id=IMAGE, start_s=0.4,
    host_network=True, shm=F.ShmFacts(16 * GIB, 16 * GIB),
    limits=F.LimitsFacts(F.Limit(65536, 65536), F.Limit(None, None)),
    nvidia=("nvidia0", "nvidia1", "nvidiactl"), infiniband=("uverbs0",),
    intent=F.ContainerIntent(network_mode="host", shm_size_bytes=16 * GIB))
RDMA = F.NetworkFacts((F.Interface("eth0", 1500, "up", 10000, ("10.0.0.1/24",)),),
                      default_route="eth0", infiniband=("mlx5_0",),
                      ib_ports=(F.IbPort("mlx5_0", 1, "ACTIVE", 200.0, "InfiniBand"),))


def boxed(n: int = 4, **over: Any) -> dict[str, Any]:
    """n hosts whose job runs in GOOD's container, with two GPUs and an active RDMA port."""
    hosts = same(n, gpu=gpu(n=2), network=RDMA, container=GOOD)
    for host, fields in over.items():
        hosts[host] = dict(hosts[host], **fields)
    return hosts


def bad(findings: Any) -> dict[str, tuple[Status, str]]:
    return {h: (f.status, f.message) for f in findings if f.status is not Status.PASS
            for h in f.hosts}


def test_a_healthy_containerised_cluster_passes_every_container_check():
    c = cluster(**boxed())
    for mod in (container, container_network, container_gpus, container_rdma, memlock, shm,
                nofile):
        found = list(mod.check(c))
        assert found and all(f.status is Status.PASS for f in found), (mod.NAME, found)
    (ok,) = container.check(c)
    assert "one image on 4 hosts, started in at most 0.4 s" in ok.message


def test_the_image_missing_or_another_under_the_tag_is_named_on_its_host():
    other = replace(GOOD, image_id="sha256:d1ceff" + "1" * 58)
    gone = replace(GOOD, image_id=None, missing="image not known", start_s=None,
                   host_network=None, shm=None, limits=None)
    c = cluster(**boxed(node02={"container": other}, node03={"container": gone}))
    found = bad(container.check(c))
    assert set(found) == {"node02", "node03"}
    assert found["node03"][0] is Status.FAIL and "is not on this host (image not known)" in \
        found["node03"][1] and "load it there" in found["node03"][1]
    assert ("image ID of localhost/paddle:3.3.1 sha256:d1ceff111111 != sha256:09158d32aa00 "
            "(2 of 3 hosts)") in found["node02"][1]
    # The other checks do not repeat it: the container check names it, shm could not check.
    assert bad(container_network.check(c)) == {}
    assert bad(shm.check(c))["node03"][0] is Status.COULD_NOT_CHECK


def test_no_container_is_no_container_finding():
    c = cluster(**same(3))
    for mod in (container, container_network, container_gpus, container_rdma):
        assert list(mod.check(c)) == []


def test_each_planted_fault_is_named_with_its_fix():
    c = cluster(**boxed(
        node01={"container": replace(GOOD, shm=F.ShmFacts(64 << 20, 64 << 20))},
        node02={"container": replace(GOOD, host_network=False, intent=F.ContainerIntent(
            network_mode="none"))},
        node03={"container": replace(GOOD, limits=F.LimitsFacts(
            F.Limit(65536, 65536), F.Limit(65536, 65536)))},
        node04={"container": replace(GOOD, infiniband=(), nvidia=("nvidiactl",))}))
    assert "start it with --shm-size" in bad(shm.check(c))["node01"][1]
    assert "(network none)" in bad(container_network.check(c))["node02"][1]
    lock = bad(memlock.check(c))
    assert set(lock) == {"node03"} and "limited to 64 KiB" in lock["node03"][1] and \
        "--ulimit memlock=-1" in lock["node03"][1]
    assert "--device /dev/infiniband" in bad(container_rdma.check(c))["node04"][1]
    assert "--gpus all" in bad(container_gpus.check(c))["node04"][1]


def test_memlock_matters_only_where_rdma_is_used_and_takes_the_policy_floor():
    small = F.LimitsFacts(F.Limit(65536, 65536), F.Limit(8 << 20, 8 << 20))
    hosts = boxed(2)
    hosts["node01"] = dict(hosts["node01"], container=replace(GOOD, limits=small))
    hosts["node02"] = dict(hosts["node02"], network=F.NetworkFacts(()),
                           container=replace(GOOD, limits=small))
    c = cluster(**hosts)
    assert set(bad(memlock.check(c))) == {"node01"}  # node02 has no RDMA port
    c = replace(c, policy=Policy(limits=Limits(memlock_min_mib=8)))
    assert bad(memlock.check(c)) == {}


def test_gpus_hidden_by_a_variable_inside():
    c = cluster(**boxed(1, node01={"container": replace(
        GOOD, gpu_env=(("NVIDIA_VISIBLE_DEVICES", "void"),))}))
    assert "hides its GPUs (NVIDIA_VISIBLE_DEVICES=void)" in bad(container_gpus.check(c))[
        "node01"][1]


def test_a_missing_running_container_and_the_command_shape_runtimes():
    gone = F.ContainerFacts(runtime="docker", name="trainer", missing="no such object")
    shape = F.ContainerFacts(runtime="apptainer", image="paddle.sif",
                             error="apptainer has no inspect")
    c = cluster(**boxed(2, node01={"container": gone}, node02={"container": shape}))
    found = {f.hosts[0]: f for f in container.check(c)}
    assert found["node01"].status is Status.FAIL
    assert "container trainer is not running on this host" in found["node01"].message
    assert found["node02"].status is Status.SKIP  # shares the host's: judged there
    # Its /dev/shm and limits are the host's, so shm and nofile read the host's.
    assert "node02" not in bad(shm.check(c)) and "node02" not in bad(nofile.check(c))


def test_a_runtime_the_user_cannot_reach_is_could_not_check_not_a_missing_image():
    denied = F.ContainerFacts(runtime="docker", image="paddle:3.3.1", missing=(
        "permission denied while trying to connect to the Docker daemon socket at "
        "unix:///var/run/docker.sock"))
    c = cluster(**boxed(2, node01={"container": denied}))
    [f] = [f for f in container.check(c) if "node01" in f.hosts]
    assert f.status is Status.COULD_NOT_CHECK and "could not ask docker" in f.message
    assert "is not on this host" not in f.message
