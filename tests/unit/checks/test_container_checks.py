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
    cpu_cores,
    env,
    memlock,
    memory,
    nofile,
    shm,
)
from preflight.model import facts as F
from preflight.model.container import ContainerSpec
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
    shape = F.ContainerFacts(runtime="apptainer", image="paddle.sif")
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


def test_a_runtime_missing_on_a_host_is_could_not_check_naming_the_runtime():
    gone = F.ContainerFacts(runtime="podman", image="paddle:3.3.1", no_runtime=(
        "podman: not found on this host's PATH (/usr/local/bin:/usr/bin:/bin)"))
    c = cluster(**boxed(3, node02={"container": gone, "paddle": F.SectionError(
        "not read: the job's container (paddle:3.3.1) did not start here")}))
    found = bad(container.check(c))
    assert set(found) == {"node02"}
    status, text = found["node02"]
    assert status is Status.COULD_NOT_CHECK
    assert "the runtime podman is missing on this host (podman: not found on this " \
        "host's PATH" in text
    assert "not on this host" not in text.split("(")[0] and "load it" not in text
    # The checks that read the container say why they could not, with the same cause.
    assert "podman: not found" in bad(shm.check(c))["node02"][1]


def test_a_container_that_does_not_start_fails_with_the_runtimes_words():
    broken = replace(GOOD, start_s=0.2, host_network=None, shm=None, limits=None,
                     intent=None, error="Error: stat /dev/nvidia9: no such file or directory")
    c = cluster(**boxed(3, node03={"container": broken}))
    status, text = bad(container.check(c))["node03"]
    assert status is Status.FAIL
    assert "does not start" in text and "podman says: Error: stat /dev/nvidia9" in text
    # Started but unreadable (inspect failed) is what could not be checked.
    unread = replace(broken, error=None, unread="inspect: no such container")
    c = cluster(**boxed(3, node03={"container": unread}))
    assert bad(container.check(c))["node03"][0] is Status.COULD_NOT_CHECK


def test_on_the_hosts_ipc_the_shm_fix_is_the_hosts_and_shm_size_is_said_not_to_apply():
    # Podman 4.3's inspect says "shareable" for --ipc host: the namespace is the truth.
    on_host = replace(GOOD, shm=F.ShmFacts(64 << 20, 64 << 20), host_ipc=True,
                      intent=F.ContainerIntent(network_mode="host", ipc_mode="shareable"))
    c = cluster(**boxed(3, node01={"container": on_host}))
    status, text = bad(shm.check(c))["node01"]
    assert "shares the host's IPC" in text and "enlarge the host's" in text
    assert "--shm-size" not in text
    # Given a shm_size under ipc: host (from the defaults, say), it says it did not apply.
    spec = ContainerSpec("podman", image="paddle:3.3.1", ipc="host", shm_size="16g")
    c = replace(c, outcomes=tuple(replace(o, host=replace(o.host, container=spec))
                                  if o.host.name == "node02" else o for o in c.outcomes))
    [ok] = [f for f in shm.check(c) if f.status is Status.PASS]
    assert "node02: shm_size 16g does not apply on a shared IPC namespace" in ok.message


def test_the_environment_compared_is_the_containers():
    login = F.EnvFacts((("NCCL_DEBUG", "WARN"),))
    inside = replace(GOOD, env=F.EnvFacts(()))
    nan = replace(GOOD, env=F.EnvFacts((("FLAGS_check_nan_inf", "1"),)))
    # Every login shell sets the same; one image sets a flag the others do not.
    c = cluster(**boxed(3, node01={"env": login, "container": inside},
                        node02={"env": login, "container": inside},
                        node03={"env": login, "container": nan}))
    found = bad(env.check(c))
    assert set(found) == {"node03"} and "FLAGS_check_nan_inf 1 != unset" in found["node03"][1]


def test_the_containers_cpu_and_memory_limits_are_what_the_job_gets():
    narrow = replace(GOOD, cgroup=F.ContainerCgroup(
        affinity=16, cpuset="0-15", quota=F.CpuQuota(1, 100000, 100000, 1.0),
        memory_limit_bytes=4 * GIB))
    c = cluster(**boxed(3, node02={"container": narrow}))
    cores = bad(cpu_cores.check(c))
    assert set(cores) == {"node02"} and cores["node02"][0] is Status.FAIL
    assert "node02: 1 effective cores (the job's container: cgroup v1 quota 100000/100000 " \
        "us) vs cluster median 16" in cores["node02"][1]
    mem = bad(memory.check(c))
    assert set(mem) == {"node02"} and mem["node02"][0] is Status.FAIL
    assert "4 GiB (the job's container's memory limit) vs cluster median 64 GiB" in \
        mem["node02"][1]
    # A cpuset narrower than the host: its CPUs are what the job has.
    pinned = replace(GOOD, cgroup=F.ContainerCgroup(affinity=4, cpuset="0-3"))
    c = cluster(**boxed(3, node01={"container": pinned}))
    assert "CPU affinity 4 of 16" in bad(cpu_cores.check(c))["node01"][1]
    # A container allowed more than its host changes nothing.
    wide = replace(GOOD, cgroup=F.ContainerCgroup(affinity=16, cpuset="0-15",
                                                  memory_limit_bytes=1 << 40))
    c = cluster(**boxed(3, node01={"container": wide}))
    assert bad(cpu_cores.check(c)) == {} and bad(memory.check(c)) == {}


def test_free_cores_in_a_narrow_container_are_its_own_or_what_the_host_leaves():
    host = F.CpuFacts(logical=64, affinity=64, effective=64.0, utilization=0.1,
                      loadavg=(1.0,), other_work=F.OtherWork("host", 62.5, 1.0),
                      host_effective=None)
    assert replace(host, effective=2.0, host_effective=64.0).free_cores == 1.5
    assert replace(host, other_work=F.OtherWork("host", 3.0, 1.0), effective=2.0,
                   host_effective=64.0).free_cores == 2.0
