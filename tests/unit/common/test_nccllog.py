"""Reading NCCL's choice of network from its log lines (as NCCL 2.x prints them)."""

from __future__ import annotations

import pytest

from preflight.common.nccllog import is_socket, transport


@pytest.mark.parametrize("log, expected", [
    ("Using network IB", "IB"),
    ("NET/IB : No device found.; NET/Socket : Using [0]ens3:172.31.12.210<0>; "
     "Using network Socket", "Socket"),
    ("NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open "
     "shared object file; Using network IBext_v8", "IBext_v8"),
    ("Using network AWS Libfabric", "AWS Libfabric"),
    # Releases before the "Using network" line: the NET lines say it.
    ("NET/IB : Using [0]mlx5_9:1/RoCE [RO]; OOB enp225s0f1:10.10.10.2<0>", "IB"),
    ("NET/IB : No device found.; NET/Socket : Using [0]eth0:10.0.0.1<0>", "Socket"),
    ("NET/Plugin : No plugin found (libnccl-net.so)", None),
    ("", None), (None, None),
])
def test_the_transport_nccl_chose_is_read_from_its_log(log, expected):
    assert transport(log) == expected
    assert is_socket(transport(log)) == (expected == "Socket")
