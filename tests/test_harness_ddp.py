"""The torchrun-style launcher (devlint/harness/distributed.py) and the
harness's ``ddp`` placement (docs/harness.md).

The launcher tests run torch-free scripts (a group starts in milliseconds);
one test runs a real gloo group to show the rendezvous works as torchrun's."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import ROOT
from devlint.harness.distributed import GroupResult, last_error, launch_script

LINUX = sys.platform.startswith("linux")


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return str(path)


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists (and is not a zombie of ours:
    the launcher reaps its ranks)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process took the pid
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def _gone(pids, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _pids(folder: Path, names, within: float = 20.0) -> dict:
    """The pids the ranks wrote into ``folder`` (one file per name)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = {n: (folder / n).read_text().strip() for n in names if (folder / n).exists()}
        if len(found) == len(names) and all(found.values()):
            return {n: int(v) for n, v in found.items()}
        time.sleep(0.05)
    raise AssertionError(f"the ranks did not start: {sorted(os.listdir(folder))}")


def _port_free(port: int) -> bool:
    """Nothing listens on the port: a new server can bind it. Connections
    the group's store closed may linger in TIME_WAIT, as after any TCP
    server; like PyTorch's TCPStore, the check binds with SO_REUSEADDR."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# --------------------------------------------------------------------------
# the launcher


ENV_SCRIPT = """
import json, os, sys
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
        "TORCHELASTIC_RUN_ID", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "EXTRA"]
print(json.dumps({"env": {k: os.environ.get(k) for k in keys}, "argv": sys.argv[1:], "cwd": os.getcwd()}))
"""


def test_every_rank_gets_torchruns_environment(tmp_path):
    script = _script(tmp_path, "env.py", ENV_SCRIPT)
    r = launch_script(script, ["--lr", "0.1"], nprocs=3, timeout=30, env={"EXTRA": "x"}, cwd=str(tmp_path))
    assert r.ok and r.error_line() == "" and r.returncodes == [0, 0, 0]
    seen = [json.loads(out) for out in r.stdout]
    for rank, s in enumerate(seen):
        env = s["env"]
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == (str(rank), str(rank), "3", "3")
        assert env["MASTER_ADDR"] == "127.0.0.1" and env["MASTER_PORT"] == str(r.port)
        assert env["CUDA_VISIBLE_DEVICES"] == "" and env["OMP_NUM_THREADS"] in ("1", os.environ.get("OMP_NUM_THREADS"))
        assert env["EXTRA"] == "x" and s["argv"] == ["--lr", "0.1"] and s["cwd"] == str(tmp_path)
    assert len({s["env"]["TORCHELASTIC_RUN_ID"] for s in seen}) == 1 and seen[0]["env"]["TORCHELASTIC_RUN_ID"]
    assert _port_free(r.port)
    # env may give the GPUs back
    r = launch_script(script, nprocs=1, timeout=30, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert json.loads(r.stdout[0])["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_a_failing_rank_stops_the_others_and_what_they_started(tmp_path):
    script = _script(
        tmp_path,
        "fail.py",
        """
        import os, subprocess, sys, time
        rank = os.environ["RANK"]
        out = sys.argv[1]
        if rank == "1":
            time.sleep(0.5)
            raise ValueError("boom on rank 1")
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(os.path.join(out, "grandchild"), "w").write(str(child.pid))
        open(os.path.join(out, "rank0"), "w").write(str(os.getpid()))
        time.sleep(60)
        """,
    )
    start = time.monotonic()
    r = launch_script(script, [str(tmp_path)], nprocs=2, timeout=60, grace=1.0)
    assert time.monotonic() - start < 15
    assert not r.ok and not r.timed_out and r.first_failed == 1 and r.stopped == [0]
    assert r.returncodes[1] == 1 and r.returncodes[0] == -signal.SIGTERM
    assert r.error_line() == "rank 1 exited with status 1: ValueError: boom on rank 1"
    pids = _pids(tmp_path, ["rank0", "grandchild"])
    assert _gone(pids.values())
    assert _port_free(r.port)


def test_a_hanging_group_is_stopped_at_the_time_limit(tmp_path):
    script = _script(
        tmp_path,
        "hang.py",
        """
        import os, signal, sys, time
        if os.environ["RANK"] == "1":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends it
        open(os.path.join(sys.argv[1], "rank" + os.environ["RANK"]), "w").write(str(os.getpid()))
        time.sleep(60)
        """,
    )
    r = launch_script(script, [str(tmp_path)], nprocs=2, timeout=2.0, grace=0.5)
    assert r.timed_out and not r.ok and r.stopped == [0, 1] and r.seconds < 10
    assert r.returncodes == [-signal.SIGTERM, -signal.SIGKILL]
    assert r.error_line() == "timed out after 2s (ranks still running: 0, 1); every rank was stopped"
    assert _gone(_pids(tmp_path, ["rank0", "rank1"]).values())
    assert _port_free(r.port)


LAUNCHER = """
import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
from devlint.harness.distributed import launch_script
try:
    launch_script(sys.argv[1], [sys.argv[2]], nprocs=2, timeout=60, grace=0.5)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""

SLEEPER = """
import os, sys, time
open(os.path.join(sys.argv[1], "rank" + os.environ["RANK"]), "w").write(str(os.getpid()))
time.sleep(60)
"""


def _launcher(tmp_path: Path) -> subprocess.Popen:
    launcher = _script(tmp_path, "launcher.py", LAUNCHER)
    sleeper = _script(tmp_path, "sleeper.py", SLEEPER)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, launcher, sleeper, str(tmp_path)], env=env, stdout=subprocess.PIPE, text=True)


def test_ctrl_c_stops_every_rank_then_raises(tmp_path):
    proc = _launcher(tmp_path)
    pids = _pids(tmp_path, ["rank0", "rank1"])
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130 and out.strip() == "interrupted"
    assert _gone(pids.values(), within=2.0)


@pytest.mark.skipif(not LINUX, reason="the parent-death signal is Linux's")
def test_a_killed_launcher_leaves_no_rank_behind(tmp_path):
    proc = _launcher(tmp_path)
    pids = _pids(tmp_path, ["rank0", "rank1"])
    proc.kill()
    proc.wait(10)
    assert _gone(pids.values())


def test_last_error_reads_the_traceback_not_the_noise_after_it():
    text = (
        "some output\nTraceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n    f()\n"
        "RuntimeError: Expected all tensors to be on the same device\nsecond line of the message\n"
        "[W1203 ProcessGroup.cpp] Warning: destroy_process_group() was not called\n"
    )
    assert last_error(text) == "RuntimeError: Expected all tensors to be on the same device"
    assert last_error("Killed\n\n") == "Killed"
    assert last_error("") == ""
    r = GroupResult([0, -9], ["", ""], ["", ""], False, 1.0, first_failed=1)
    assert r.error_line() == "rank 1 killed by SIGKILL"


GLOO_SCRIPT = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")  # env:// from the launcher's variables
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(dist.get_rank(), dist.get_world_size(), int(t.item()))
dist.destroy_process_group()
"""


def test_a_real_gloo_group_meets_through_env_rendezvous(tmp_path):
    pytest.importorskip("torch")
    r = launch_script(_script(tmp_path, "gloo.py", GLOO_SCRIPT), nprocs=2, timeout=120)
    assert r.ok, r.error_line() + "\n" + "\n".join(r.stderr)
    assert [out.split() for out in r.stdout] == [["0", "2", "3"], ["1", "2", "3"]]
    assert _port_free(r.port)
