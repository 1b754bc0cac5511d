"""What NCCL's own log (NCCL_DEBUG=INFO, subsystems INIT and NET) says of the network it chose.

NCCL prints "Using network IB" (or Socket, or a plugin's name: IBext from HPC-X's SHARP
plugin, AWS Libfabric, ...) once a communicator has picked its transport; releases before
that line existed print "NET/IB : Using [0]mlx5_0:1/IB ..." or "NET/Socket : Using [0]eth0:...".
Socket means TCP: on an RDMA cluster it is the silent fall-back that costs most of the fabric's
bandwidth (the IB stack missing in a container, NCCL_IB_DISABLE=1, no ACTIVE port)."""

from __future__ import annotations

import re
from typing import Optional

SOCKET = "Socket"
# NVLink and multi-rail fabrics show their bandwidth only past ~256 MB (nccl-tests): NCCL runs
# get this size too when the user kept the defaults and the budget allows it, and only a run
# that reached it is held to the fabric's rate.
LARGE_MIB = 256.0
_USING = re.compile(r"Using network ([A-Za-z][\w .-]*?)\s*(?:;|$)", re.MULTILINE)
# The greps on the host (allreduce.hints_script) keep these lines, less their prefixes.
CHOSEN = r"^Using network "
TRIED = r"^NET/(IB|Socket) ?: ?(Using|No device)|^NET/Plugin"


def transport(log: Optional[str]) -> Optional[str]:
    """The transport NCCL chose, as its log names it ("IB", "Socket", a plugin's name); None
    when the log does not say (no NET lines: a single host, or NCCL_DEBUG unset)."""
    if not log:
        return None
    chosen = _USING.findall(log)
    if chosen:
        return str(chosen[-1])
    if "NET/IB : Using" in log:
        return "IB"
    if "NET/Socket : Using" in log:
        return SOCKET
    return None


def is_socket(name: Optional[str]) -> bool:
    return name == SOCKET
