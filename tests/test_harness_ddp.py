"""The torchrun-style launcher (devlint/harness/distributed.py) and the
harness's ``ddp`` placement (docs/harness.md).

The launcher tests run torch-free scripts (a group starts in milliseconds);
one test runs a real gloo group to show the rendezvous works as torchrun's."""

from __future__ import annotations

import json
import os
import re
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


def _forked_rank(rank: int) -> int:
    print(os.environ["RANK"], os.environ["LOCAL_RANK"], os.environ["WORLD_SIZE"], os.environ["MASTER_PORT"], os.getpid())
    if rank == 1:
        raise ValueError("boom in a forked rank")
    time.sleep(60)
    return 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_forked_ranks_get_the_same_environment_and_the_same_end():
    from devlint.harness.distributed import launch_function

    start = time.monotonic()
    r = launch_function(_forked_rank, nprocs=2, timeout=30, grace=0.5)
    assert time.monotonic() - start < 10
    assert r.first_failed == 1 and r.stopped == [0] and r.returncodes == [-signal.SIGTERM, 1]
    assert r.error_line() == "rank 1 exited with status 1: ValueError: boom in a forked rank"
    seen = [out.split() for out in r.stdout]
    assert [s[:4] for s in seen] == [["0", "0", "2", str(r.port)], ["1", "1", "2", str(r.port)]]
    assert _gone([int(s[4]) for s in seen])


def _flaky_rank(rank: int) -> int:
    """Rank 1 fails on the group's connections the first time only; rank 0
    prints its port each time."""
    marker = os.path.join(os.environ["DEVLINT_TEST_FLAKY"], "failed-once")
    print(os.environ["MASTER_PORT"])
    if rank == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("torch.distributed.DistNetworkError: Connection reset by peer")
    return 0


def _code_error_rank(rank: int) -> int:
    if rank == 1:
        raise ValueError("Expected all tensors to be on the same device")
    return 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_a_group_that_failed_on_its_own_connections_runs_once_more(tmp_path, monkeypatch):
    from devlint.harness.distributed import launch_function

    monkeypatch.setenv("DEVLINT_TEST_FLAKY", str(tmp_path))
    r = launch_function(_flaky_rank, nprocs=2, timeout=30, grace=0.5)
    assert r.ok, r.error_line()
    assert r.retried == "rank 1 exited with status 1: RuntimeError: torch.distributed.DistNetworkError: Connection reset by peer"
    # the code's own failure is its result: no second run
    r = launch_function(_code_error_rank, nprocs=2, timeout=30, grace=0.5)
    assert r.first_failed == 1 and r.retried == ""
    assert r.error_line() == "rank 1 exited with status 1: ValueError: Expected all tensors to be on the same device"


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


# --------------------------------------------------------------------------
# the ddp placement: cases run directly (devlint.harness.ddp.run_case, the
# worker's entry point), each rank forked from this process

torch = pytest.importorskip("torch")

CASES = ROOT / "tests" / "harness_cases"
CHECKS = CASES / "ddp_checks.py"


def _job(original: Path, fixed: Path = None) -> dict:
    return {
        "original": str(original),
        "fixed": str(fixed or original),
        "display": original.name,
        "fixed_display": f"{original.name} (fixed)",
        "simulate": True,
        "same": fixed is None,
        "search_path": [str(original.parent)],
    }


def _run(name: str, timeout: float = 60, original: Path = CHECKS, fixed: Path = None) -> dict:
    from devlint.harness import ddp
    from devlint.harness.worker import _case, _load, check_case

    sys.path.insert(0, str(original.parent))
    try:
        case = check_case(_case(_load(str(original)), name))
    finally:
        sys.path.remove(str(original.parent))
    return ddp.run_case(_job(original, fixed), name, {"devices": case["devices"]}, timeout)


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    """Every case of ddp_checks.py but the hanging one, run once."""
    pids = tmp_path_factory.mktemp("pids")
    os.environ["DEVLINT_TEST_PIDS"] = str(pids)
    names = [
        "placed_then_wrapped", "wrapped_on_the_cpu", "cpu_module_nccl", "cpu_module_gloo", "device_ids_zero",
        "every_rank_on_gpu_0", "moved_after_wrap_gloo", "moved_before_wrap_gloo", "ranks_disagree", "frozen",
        "two_device_ids", "half_on_the_cpu", "no_group", "wrapped_twice", "load_as_saved", "load_to_the_rank",
        "load_to_cpu", "save_then_load", "all_reduce_fake", "all_reduce_cpu_nccl", "aborts_on_rank_1",
        "three_ranks", "argv",
    ]
    return {name: _run(name) for name in names}


def _failure(r: dict) -> dict:
    assert r["original"]["status"] == "reproduced", json.dumps(r, indent=1)[:2000]
    return r["original"]["error"]


def _devices(r: dict) -> list:
    assert r["original"]["status"] == "not reproduced", json.dumps(r, indent=1)[:2000]
    # a same-text job stops after step 1; what each rank gave is in "ranks"
    assert all(x["status"] == "ok" for x in r["original"]["ranks"])
    return r


#: (failing case, type, message as PyTorch words it, look-alike that runs)
CHECKED = [
    # torch/nn/parallel/distributed.py, DistributedDataParallel.__init__
    ("wrapped_on_the_cpu", "ValueError",
     r"DistributedDataParallel device_ids and output_device arguments only work with single-device/multiple-device "
     r"GPU modules or CPU modules, but got device_ids \[\d\], output_device None, and module parameters "
     r"\{device\(type='cpu'\)\}\.", "placed_then_wrapped"),
    ("frozen", "RuntimeError",
     "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient.",
     "placed_then_wrapped"),
    ("two_device_ids", "ValueError", r"device_ids can only be None or contain a single element\.", "placed_then_wrapped"),
    ("half_on_the_cpu", "ValueError",
     r"DistributedDataParallel's input module must be on the same type of devices, but input module parameters locate in",
     "placed_then_wrapped"),
    # distributed_c10d._get_default_group
    ("no_group", "ValueError", "Default process group has not been initialized", "placed_then_wrapped"),
    # c10d's ProcessGroup::getBackend: "nccl" serves CUDA tensors only
    ("cpu_module_nccl", "RuntimeError", "^No backend type associated with device type cpu$", "cpu_module_gloo"),
    ("all_reduce_cpu_nccl", "RuntimeError", "^No backend type associated with device type cpu$", "all_reduce_fake"),
    # NCCL: one GPU per rank
    ("every_rank_on_gpu_0", "DistBackendError", r"Duplicate GPU detected : rank (0 and rank 1|1 and rank 0) both on CUDA device 0",
     "placed_then_wrapped"),
    # the real _verify_params_across_processes, over gloo
    ("ranks_disagree", "RuntimeError", r"params\[0\] in this process with sizes \[1[67], 8\] appears not to match",
     "placed_then_wrapped"),
    # DDP's _pre_forward moves the inputs to device_ids[0]
    ("device_ids_zero", "RuntimeError", r"Expected all tensors to be on the same device.*cuda:[01] and cuda:[01]",
     "placed_then_wrapped"),
    # reducer.cpp, check_grad_layout
    ("moved_after_wrap_gloo", "RuntimeError", r"^grad\.device\(\) == bucket_view\.device\(\) INTERNAL ASSERT FAILED",
     "moved_before_wrap_gloo"),
]


@pytest.mark.parametrize("failing, kind, message, lookalike", CHECKED, ids=[c[0] for c in CHECKED])
def test_each_check_fails_its_case_and_passes_its_lookalike(checks, failing, kind, message, lookalike):
    error = _failure(checks[failing])
    assert error["type"] == kind, error
    assert re.search(message, error["message"]), error["message"]
    assert re.fullmatch(r"rank [01] of 2", error["replica"]) and error["phase"] == "running the case"
    assert error["line"].startswith("ddp_checks.py:")
    _devices(checks[lookalike])
    assert checks[failing]["device_path"] == "simulated (2 ranks, gloo, fake cuda:<local_rank>)"


def test_the_failing_rank_is_the_one_the_bug_is_on(checks):
    # device_ids=[0] is right on rank 0: rank 1 fails, rank 0 ran (or was
    # stopped with its group when rank 1 failed first)
    r = checks["device_ids_zero"]
    assert r["original"]["error"]["replica"] == "rank 1 of 2"
    assert "cuda:0 and cuda:1" in r["original"]["error"]["message"] or "cuda:1 and cuda:0" in r["original"]["error"]["message"]
    statuses = {x["rank"]: x["status"] for x in r["original"]["ranks"]}
    assert statuses[1] == "failed" and statuses[0] in ("ok", "stopped")


def test_the_emulated_messages_are_pytorchs_own():
    """The constructor's messages the emulation raises are in the installed
    PyTorch's DistributedDataParallel source."""
    import inspect

    from torch.nn.parallel import distributed

    from devlint.harness import ddp_env as D

    source = " ".join(inspect.getsource(distributed.DistributedDataParallel.__init__).split())
    for text in (D.NO_GRAD_PARAMETERS, D.ONE_DEVICE_ID):
        assert " ".join(text.split()) in source.replace('" "', ""), text
    assert "only work with single-device/multiple-device GPU modules or CPU modules" in source.replace('" "', "")


def test_ddp_wrapped_twice_runs_as_the_real_one_does(checks):
    # real DDP accepts a DDP (both reducers average the same gradients: no
    # error, same parameters; checked on gloo); the bug shows in the
    # checkpoint keys (fixtures/DL003/bad_ddp_rewrap_on_resume.py)
    _devices(checks["wrapped_twice"])


def test_checkpoints_land_where_pytorch_puts_them(checks):
    def devices(name):
        return [o["device"] for o in _outputs(checks[name])]

    assert devices("load_as_saved") == ["cuda:0", "cuda:0"]  # every rank: the GPU that saved it
    assert devices("load_to_the_rank") == ["cuda:0", "cuda:1"]
    assert devices("load_to_cpu") == ["cpu", "cpu"]
    assert devices("save_then_load") == ["cuda:0", "cuda:1"]  # a fake tensor saved keeps its device


def _outputs(r: dict) -> list:
    """What every rank's run gave under the placement, in rank order."""
    return _devices(r)["original"]["outputs"]


def test_a_crashing_rank_is_named_and_the_group_stopped(checks):
    r = checks["aborts_on_rank_1"]
    assert r["crash"].startswith("rank 1 killed by SIGABRT (the original under the placement)")
    assert "original" not in r


def test_world_size_and_argv(checks):
    r = checks["three_ranks"]
    assert r["devices"] == 3 and [o["device"] for o in _outputs(r)] == ["cuda:0", "cuda:1", "cuda:2"]
    assert [o["shape"] for o in _outputs(checks["argv"])] == [[2], [2]]


def test_a_hanging_group_is_stopped_within_the_case_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVLINT_TEST_PIDS", str(tmp_path))
    start = time.monotonic()
    r = _run("hangs_on_rank_1", timeout=8)  # the group gets the limit less 5s
    assert time.monotonic() - start < 8
    assert r["timeout"] == "timed out after 3s (ranks still running: 0, 1); every rank was stopped (the original under the placement)"
    assert _gone(_pids(tmp_path, ["rank0", "rank1"]).values())


# --------------------------------------------------------------------------
# step 3: original and fixed on the CPU, over gloo, with the real DDP


TRAINING = CASES / "ddp_training.py"


def _variant(tmp_path: Path, name: str, *edits) -> Path:
    text = TRAINING.read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


RANK_DEVICE = ("device_ids=[0]", "device_ids=[rank]")


def test_the_fix_is_confirmed_by_the_parameters_after_training(tmp_path):
    fixed = _variant(tmp_path, "fixed.py", RANK_DEVICE)
    r = _run("two_steps", original=TRAINING, fixed=fixed)
    assert r["original"]["error"]["replica"] == "rank 1 of 2"
    assert r["fixed"]["status"] == "ok", r["fixed"]
    # run() returned nothing: the outputs are the wrapped model's parameters, per rank
    assert [(o["rank"], o["shape"], o["device"]) for o in r["fixed"]["outputs"]] == [
        (0, [2, 4], "cuda:0"), (0, [2], "cuda:0"), (1, [2, 4], "cuda:1"), (1, [2], "cuda:1"),
    ]
    assert r["equivalence"]["status"] == "equal"
    assert r["equivalence"]["detail"] == "on every rank, after the same steps: 2 output tensors bitwise equal"


@pytest.mark.parametrize(
    "edit",
    [
        ("LR = 0.1", "LR = 0.2"),  # another learning rate
        ("        loss = model(x).pow(2).mean()", "        with model.no_sync():  # no averaging\n            loss = model(x).pow(2).mean()"),
    ],
    ids=["learning_rate", "no_sync"],
)
def test_a_fix_that_changes_the_training_is_caught(tmp_path, edit):
    # under no_sync each rank keeps its own gradients: the CPU run's all-reduce is real
    fixed = _variant(tmp_path, "fixed.py", RANK_DEVICE, edit)
    r = _run("two_steps", original=TRAINING, fixed=fixed)
    assert r["fixed"]["status"] == "ok"
    assert r["equivalence"]["status"] == "differs"
    assert re.match(r"rank [01]: outputs differ \(max abs diff", r["equivalence"]["detail"])


#: a training step that asks torch.cuda what scripts ask it (seen on an
#: H200, torch 2.11: optimizer.step() asks is_current_stream_capturing())
CUDA_CALLS = (
    "        optimizer.step()\n",
    "        optimizer.step()\n"
    "        assert not torch.cuda.is_current_stream_capturing()\n"
    "        torch.cuda.synchronize()\n"
    "        torch.cuda.set_rng_state(torch.cuda.get_rng_state())\n"
    "        torch.cuda.reset_peak_memory_stats()\n"
    "        assert torch.cuda.memory_allocated() == 0\n"
    "        torch.cuda.current_stream().synchronize()\n",
)


def test_the_cuda_calls_of_a_training_step_run_on_every_path_of_a_rank(tmp_path):
    # under the placement (fake cuda:<rank>) and in step 3, where the CPU
    # stands for each rank's GPU and is_available() still says True: none
    # of these may reach the driver (a CUDA build without a GPU: "no
    # CUDA-capable device is detected"; a CPU build: "Torch not compiled
    # with CUDA enabled")
    original = _variant(tmp_path, "original.py", CUDA_CALLS)
    fixed = _variant(tmp_path, "fixed.py", CUDA_CALLS, RANK_DEVICE)
    r = _run("two_steps", original=original, fixed=fixed)
    assert r["original"]["error"]["replica"] == "rank 1 of 2"
    assert r["fixed"]["status"] == "ok", r["fixed"]
    assert r["equivalence"]["status"] == "equal", r["equivalence"]


def test_no_forked_ranks_once_autograd_would_refuse_them(monkeypatch):
    # Seen on a CUDA build (2026-12-04): the simulated path makes CUDA's
    # device guard a no-op, which counts one CUDA device, so the worker's
    # first backward() started autograd's device threads; a rank forked
    # after that failed step 3 at loss.backward() with "Unable to handle
    # autograd's threading in combination with fork-based multiprocessing"
    from devlint.harness import ddp
    from devlint.harness import env as E

    monkeypatch.setattr(ddp, "can_fork", lambda: True)
    monkeypatch.setattr(E, "fork_breaks_autograd", lambda: False)
    assert ddp.fork_ranks(0) and not ddp.fork_ranks(1)
    monkeypatch.setattr(E, "fork_breaks_autograd", lambda: True)
    assert not ddp.fork_ranks(0)
    started = []
    real_launch = ddp.launch
    monkeypatch.setattr(ddp, "launch", lambda *a, **k: started.append(a[0]) or real_launch(*a, **k))
    r = _run("device_ids_zero")
    assert started and all(cmd[1:3] == ["-m", "devlint.harness.ddp"] for cmd in started)
    assert r["original"]["error"]["replica"] == "rank 1 of 2"


def test_ranks_started_as_fresh_interpreters(monkeypatch):
    """The path real GPUs take (a process that used CUDA cannot fork one
    that does): ``python -m devlint.harness.ddp SPEC`` per rank."""
    from devlint.harness import ddp

    monkeypatch.setattr(ddp, "can_fork", lambda: False)
    r = _run("device_ids_zero")
    assert r["original"]["error"]["replica"] == "rank 1 of 2"
    assert "Expected all tensors to be on the same device" in r["original"]["error"]["message"]


# --------------------------------------------------------------------------
# the convention, and the whole path through the worker


def test_ddp_case_keys():
    from devlint.harness import CaseError, check_case

    c = check_case({"name": "a", "placement": "ddp", "run": print})
    assert (c["world_size"], c["devices"], c["seed"], c["argv"], c["checkpoints"], c["output_device"]) == (2, 2, 0, [], {}, "rank")
    assert check_case({"name": "a", "placement": "ddp", "run": print, "world_size": 4, "argv": ("-v",)})["argv"] == ["-v"]
    bad = [
        ({"world_size": 1}, "'world_size' must be an int >= 2"),
        ({"argv": "--lr 0.1"}, "'argv' must be a list of strings"),
        ({"checkpoints": {"ckpt/last.pt": dict}}, "'checkpoints' must map file names"),
        ({"checkpoints": {"last.pt": {}}}, "'checkpoints' must map file names"),
        ({"devices": 2}, "unknown key 'devices'"),
        ({"run": None}, "'run' must be a callable"),
    ]
    for extra, message in bad:
        with pytest.raises(CaseError, match=re.escape(message)):
            check_case(dict({"name": "a", "placement": "ddp", "run": print}, **extra))


def test_through_the_worker_a_hang_is_one_error_and_the_rest_goes_on(tmp_path, monkeypatch):
    from devlint.harness import job_for_text, verify_jobs

    monkeypatch.setenv("DEVLINT_TEST_PIDS", str(tmp_path))
    path = tmp_path / "group.py"
    path.write_text(
        "from ddp_checks import device_ids_zero, hangs_on_rank_1, placed_then_wrapped\n\n\n"
        "def devlint_cases():\n"
        "    return [\n"
        "        {'name': 'hangs', 'placement': 'ddp', 'run': hangs_on_rank_1},\n"
        "        {'name': 'bad', 'placement': 'ddp', 'run': device_ids_zero, 'world_size': 1},\n"
        "        {'name': 'runs', 'placement': 'ddp', 'run': placed_then_wrapped},\n"
        "    ]\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(CASES) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.monotonic()
    rows = {r["case"]: r for r in verify_jobs([job_for_text(str(path), path.read_text())], simulate=True, timeout=10)}
    assert time.monotonic() - start < 60
    assert rows["hangs"]["verdict"] == "error" and rows["hangs"]["timeout"].startswith("timed out after 5s")
    assert rows["bad"]["verdict"] == "error" and "'world_size' must be an int >= 2" in rows["bad"]["case_error"]
    assert rows["runs"]["verdict"] == "no bug" and rows["runs"]["placement"] == "ddp"
    assert _gone(_pids(tmp_path, ["rank0", "rank1"]).values())
