"""py-spy's dumps read into each rank's innermost frame, and the hang that groups them."""

from __future__ import annotations

import shlex

from preflight.watch import stacks

# py-spy 0.4 dump --nonblocking of a gloo rank waiting in its collective (the shape it prints).
DUMP = """\
Process 4242: python3 -u train_watch.py
Python v3.11.2 (/opt/env/bin/python3.11)

Thread 0x7F3A1C2B5740 (idle): "MainThread"
    backward (paddle/base/dygraph/tensor_patch_methods.py:342)
    <module> (train_watch.py:14)
Thread 0x7F3A0B3FF6C0 (idle): "Thread-1 (_read)"
    wait (threading.py:327)
"""


def test_the_innermost_frame_of_the_main_thread_is_kept():
    out = f"{stacks.MARK}4242\n{DUMP}{stacks.MARK}77\npy-spy: not found\n"
    assert stacks.parse(out) == {
        4242: "backward (paddle/base/dygraph/tensor_patch_methods.py:342)",
        77: "no stack: py-spy: not found"}


def test_a_nonblocking_dump_names_threads_by_id_with_the_main_thread_first():
    dump = ("Process 371: python -c ...\nPython v3.11.2 (/usr/bin/python3.11)\n\n"
            "Thread 371 (idle)\n    waiting (<string>:3)\n    <module> (<string>:4)\n"
            "Thread 380 (idle)\n    wait (threading.py:327)\n")
    assert stacks.innermost(dump) == "waiting (<string>:3)"


def test_py_spys_own_error_is_the_reason():
    err = "Error: Failed to find python version from target process\n"
    assert stacks.innermost(err) == ("no stack: Error: Failed to find python version from "
                                     "target process")


def test_the_command_quotes_nothing_it_was_not_given_and_bounds_py_spy():
    cmd = stacks.command([12, 34])
    script = shlex.split(cmd)[2]
    assert f"timeout {stacks.SPY_TIMEOUT_S}" in script and "--nonblocking --pid 12" in script
    assert f"echo '{stacks.MARK}34'" in script
