"""`container:` read from its layers: the nearer layer wins key by key, image and name
replace each other, and a bad value is one line naming the file, host and field."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from preflight.config.container import layer, merged, spec_of
from preflight.config.document import Fields
from preflight.config.errors import InputError
from preflight.model.container import ContainerLayer, ContainerSpec


def read(data: dict[str, Any], where: str = "inv.yaml",
         host: Optional[str] = None) -> ContainerLayer:
    """A layer as its reader takes it (every value checked there, once)."""
    return layer(Fields(where, data, "container", host))


def test_layers_merge_key_by_key_the_nearest_winning():
    policy = read({"runtime": "docker", "image": "paddle:3.3.1", "shm_size": "8g"})
    defaults = read({"runtime": "podman", "ipc": "host"})
    host = read({"shm_size": "16g", "ulimits": {"memlock": -1, "nofile": "65536:65536"}})
    spec = spec_of("inv.yaml", [policy, defaults, host], "node01")
    assert spec == ContainerSpec("podman", image="paddle:3.3.1", ipc="host", shm_size="16g",
                                 ulimits=(("memlock", "-1"), ("nofile", "65536:65536")))


def test_cpu_and_memory_limits_are_read_as_dockers_flags_take_them():
    spec = spec_of("inv.yaml", [read({"image": "i", "cpus": 1.5, "cpuset": "0-7,16",
                                      "memory": "64g"})])
    assert spec is not None
    assert (spec.cpus, spec.cpuset, spec.memory) == ("1.5", "0-7,16", "64g")


def test_a_running_container_replaces_an_inherited_image():
    both = merged(read({"runtime": "docker", "image": "paddle:3.3.1"}), read({"name": "dev"}))
    assert dict(both.given) == {"runtime": "docker", "name": "dev"}
    spec = spec_of("inv.yaml", [both])
    assert spec is not None and spec.running and spec.image is None


def test_a_null_takes_back_what_a_layer_below_gave():
    spec = spec_of("inv.yaml", [read({"image": "i", "shm_size": "16g", "ipc": "host"}),
                                read({"shm_size": None})])
    assert spec == ContainerSpec("docker", image="i", ipc="host")


def test_no_container_anywhere_is_the_host():
    assert spec_of("inv.yaml", [None, read({}), None]) is None


@pytest.mark.parametrize("data, field, words", [
    ({"runtime": "lxc", "image": "i"}, "container.runtime", "'lxc' is not one of docker"),
    ({"runtime": "docker"}, "container", "give the job's image (image:) or its running"),
    ({"image": "i", "name": "n"}, "container", "not both"),
    ({"image": "--privileged"}, "container.image", "option-like"),
    ({"image": "i", "shm_size": "lots"}, "container.shm_size", "is not a size"),
    ({"image": "i", "ulimits": {"memlock": "big"}}, "container.ulimits.memlock",
     "is not a limit"),
    ({"image": "i", "ulimits": {"memory": 1}}, "container.ulimits.memory", "is not one of"),
    ({"image": "i", "env": {"1X": "a"}}, "container.env.1X", "environment variable"),
    ({"image": "i", "gpus": "0;1"}, "container.gpus", "GPU indices"),
    ({"image": "i", "mounts": ["/data"]}, "container.mounts", "SRC:DST"),
    ({"image": "i", "cpus": "two"}, "container.cpus", "is not a number of cores"),
    ({"image": "i", "cpus": 0}, "container.cpus", "is not a number of cores"),
    ({"image": "i", "cpus": True}, "container.cpus", "is not a number of cores"),
    ({"image": "i", "cpuset": "0-7;8"}, "container.cpuset", "is not a list of CPUs"),
    ({"image": "i", "memory": "64 gigs"}, "container.memory", "is not a size"),
    ({"image": "i", "colour": "red"}, "container.colour", "unknown container key"),
])
def test_a_bad_value_is_one_line_naming_host_and_field(data, field, words):
    with pytest.raises(InputError) as e:
        spec_of("inv.yaml", [read(data, host="node01")], "node01")
    text = str(e.value)
    assert text.startswith("inv.yaml: host 'node01': ") and f"field '{field}'" in text, text
    assert words in text and "\n" not in text, text
