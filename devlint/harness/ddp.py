"""The ``ddp`` placement (docs/harness.md): a case runs as N processes of one
``torch.distributed`` group, launched as ``torchrun`` launches them
(``devlint.harness.distributed``), each calling the case's ``run``.

Two halves:

* the worker's (:func:`run_case`): one group runs the original under the
  placement; a second runs the fixed code under the placement and then, in
  the same processes, original and fixed on the CPU (step 3). The groups'
  results are merged into the worker's result for the case. A rank that
  fails under the placement stops its group, as torchrun stops the others
  when one worker fails; the case's time limit covers the whole group.
* the rank's (:func:`run_rank`): the stages it is given, each result written
  to ``rank<N>.json`` as soon as it is known.

The ranks are forked from the worker (it has imported torch; a group starts
in milliseconds) where no GPU is visible, and started as
``python -m devlint.harness.ddp SPEC`` elsewhere (a process that used CUDA
cannot fork one that does) and where a forked rank could not run
``backward()`` (:func:`fork_ranks`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import traceback
from typing import Any, Dict, Iterator, List, Optional, Sequence

from devlint.harness.cases import CaseError, check_case
from devlint.harness.distributed import GroupResult, can_fork, describe_exit, last_error, launch, launch_function

#: a rank's exit status when its stage under the placement failed (its
#: result is written); the launcher then stops the group
EXIT_FAILED = 3
#: a rank's exit status after a bug of the harness (written as such)
EXIT_HARNESS = 4
#: seconds kept from the case's time limit for stopping the group and
#: reporting, so that the worker answers before its parent stops it
MARGIN = 5.0
#: seconds a collective of step 3 waits for the other ranks: a rank whose
#: original fails on the CPU must not leave the others waiting for it
CPU_COLLECTIVE_TIMEOUT = 30.0
STAGE_NAMES = {"original": "the original under the placement", "fixed": "the fixed code under the placement"}


# --------------------------------------------------------------------------
# the rank's side


@contextlib.contextmanager
def _inside(folder: str) -> Iterator[None]:
    os.makedirs(folder, exist_ok=True)
    here = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


@contextlib.contextmanager
def _argv(display: str, argv: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` as a script launched with ``argv`` sees it."""
    saved = sys.argv
    sys.argv = [display, *argv]
    try:
        yield
    finally:
        sys.argv = saved


def _ddp_case(module: Any, name: str) -> dict:
    from devlint.harness import worker as W

    case = check_case(W._case(module, name))
    if case["placement"] != "ddp":
        raise CaseError(f"case {name!r} is not a ddp case in this version of the file")
    return case


def _write_checkpoints(case: dict, ctx: Any, tagged: bool) -> None:
    """Rank 0 writes the case's checkpoints into the stage's folder (shared
    by the ranks), every storage tagged ``cuda:0`` when ``tagged`` (a GPU
    run's checkpoint); the others wait for them."""
    import torch

    from devlint.harness import ddp_env as D
    from devlint.harness import worker as W

    if not case["checkpoints"]:
        return
    key = f"devlint/{ctx.stage}/checkpoints"
    if ctx.rank == 0:
        for name, build in case["checkpoints"].items():
            torch.manual_seed(case["seed"])
            obj = build()
            if tagged:
                W._save_as_if_from_cuda(obj, name, torch, save=D.REAL_SAVE)
            else:
                D.REAL_SAVE(obj, name)
        ctx.store.set(key, "written")
    else:
        ctx.store.wait([key])


def _outputs(value: Any, ctx: Any) -> list:
    """The tensors ``run`` returned; when it returned None, the parameters
    and buffers of each model the rank wrapped (the innermost module of each
    outermost wrapper), in the order they were wrapped."""
    import torch
    from torch.nn.parallel import distributed as real

    from devlint.harness import worker as W

    if value is not None:
        return W._tensors(value, torch)
    inner = {id(w.module) for w in ctx.wrapped}
    tensors: list = []
    for wrapper in ctx.wrapped:
        if id(wrapper) in inner:
            continue
        module = wrapper
        while isinstance(module, real.DistributedDataParallel):
            module = module.module
        tensors += W._tensors(module, torch)
    return tensors


def _expected(case: dict, ctx: Any, environment: Any) -> Optional[List[str]]:
    import torch

    wanted = case["output_device"]
    if wanted is None:
        return None
    if wanted == "rank":
        wanted = torch.device("cuda", ctx.local_rank)
    device = torch.device(wanted) if not isinstance(wanted, torch.device) else wanted
    return [str(environment.resolve(device) or device)]


def _forget_siblings(folders: Sequence[str]) -> None:
    """Drop the modules imported from the case file's folders (``from
    models import Net`` beside it), so that each stage imports them afresh
    under its own patches: ``from torch.nn.parallel import
    DistributedDataParallel as DDP`` binds the class of the stage it runs
    in (the worker imported them under none; a stage under another's)."""
    roots = tuple(os.path.join(os.path.abspath(f), "") for f in folders)
    if not roots:
        return
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if not where or name.startswith("_devlint_case_module_") or name == "devlint" or name.startswith("devlint."):
            continue
        where = os.path.abspath(where)
        if where.startswith(roots) and "site-packages" not in where:
            del sys.modules[name]


def _run_stage(spec: dict, ctx: Any, stage: str, path: str, display: str, environment: Any, tagged: bool) -> list:
    """Import the file, read the case, write its checkpoints and call
    ``run`` on this rank; the tensors it gave. Raises Failure."""
    import torch

    from devlint.harness import ddp_env as D
    from devlint.harness import env as E
    from devlint.harness import worker as W

    step = W.Step(path, display)
    ctx.begin(stage)
    _forget_siblings(spec.get("search_path", []))
    # no autograd on fake CUDA tensors (it aborts a CPU-only build): all the
    # code of a simulated rank runs under no_grad (its backward() is DDP's
    # reducer check, ddp_env)
    quiet = torch.no_grad() if environment.simulated else contextlib.nullcontext()
    try:
        with E.environment(environment), D.rank_environment(ctx, environment), quiet, _inside(os.path.join(spec["workdir"], stage)):
            module = W._load(path)
            step.phase = "reading the case"
            case = _ddp_case(module, spec["case"])
            step.phase = "writing the checkpoints"
            _write_checkpoints(case, ctx, tagged)
            torch.manual_seed(case["seed"])
            step.phase = "running the case"
            with _argv(display, case["argv"]):
                value = case["run"]()
            step.phase = "reading the outputs"
            tensors = _outputs(value, ctx)
            ctx.expected = _expected(case, ctx, environment)
            return tensors
    except (W.Failure, KeyboardInterrupt):
        raise
    except BaseException as exc:  # user code: anything may come out, sys.exit() included
        failure = step.fail(exc)
        failure.info["replica"] = f"rank {ctx.rank} of {ctx.world_size}"
        raise failure from None
    finally:
        D.destroy_group()


def _under_placement(spec: dict, ctx: Any, stage: str) -> dict:
    from devlint.harness import env as E
    from devlint.harness import worker as W

    path, display = (spec["original"], spec["display"]) if stage == "original" else (spec["fixed"], spec["fixed_display"])
    plan = E.make_plan(spec["world_size"], simulate=not spec["real"])
    environment = E.Environment(plan, cuda_visible=True, no_grad_only=True)
    tensors = _run_stage(spec, ctx, stage, path, display, environment, tagged=True)
    expected = ctx.expected if ctx.expected is not None else sorted({str(t.device) for t in tensors})
    return {"status": "ok", "outputs": W._summary(tensors), "expected_devices": expected}


def _equivalence(spec: dict, ctx: Any) -> dict:
    """Step 3 on this rank: original and fixed on the CPU (which stands for
    every GPU), over gloo with the real DistributedDataParallel; the tensors
    they give must be equal."""
    import torch

    from devlint.harness import env as E
    from devlint.harness import worker as W

    plan = E.DevicePlan(E.REAL, [torch.device("cpu")] * spec["world_size"], "real (cpu)")
    ctx.collective_timeout = CPU_COLLECTIVE_TIMEOUT
    outputs: Dict[str, list] = {}
    errors: Dict[str, dict] = {}
    for which in ("original", "fixed"):
        path, display = (spec["original"], spec["display"]) if which == "original" else (spec["fixed"], spec["fixed_display"])
        try:
            outputs[which] = _run_stage(spec, ctx, f"cpu-{which}", path, display, E.Environment(plan, cuda_visible=True), tagged=False)
        except W.Failure as f:
            errors[which] = f.info
    reference = W._summary(outputs["fixed"]) if "original" in errors and "fixed" not in errors else None
    failed = W.one_device_failure(errors, reference, "reference")
    if failed is not None:
        return failed
    out = W._compare(outputs["original"], outputs["fixed"], "", torch)
    out["reference"] = W._summary(outputs["fixed"])
    return out


def run_rank(spec: dict, rank: int) -> int:
    """One rank: the stages ``spec`` lists, each result written to
    ``<out>/rank<rank>.json`` at once. Exits EXIT_FAILED when a stage under
    the placement fails here (the launcher then stops the group)."""
    from devlint.harness import ddp_env as D
    from devlint.harness import worker as W

    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        import torch

        # what OMP_NUM_THREADS does to a fresh process (torchrun sets 1):
        # a forked rank inherits the worker's thread pool instead
        torch.set_num_threads(int(threads))
    W._PROJECT = spec.get("project")
    for folder in reversed(spec.get("search_path", [])):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    results: Dict[str, Any] = {}
    target = os.path.join(spec["out"], f"rank{rank}.json")

    def write() -> None:
        with open(target + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(results, fh)
        os.replace(target + ".tmp", target)

    try:
        store = D.rendezvous_store(rank, spec["world_size"], spec["timeout"])
        ctx = D.Rank(rank, spec["world_size"], int(os.environ.get("LOCAL_RANK", rank)), store, nccl=spec["real"])
        for stage in spec["stages"]:
            if stage == "equivalence":
                results[stage] = _equivalence(spec, ctx)
                write()
                continue
            lines = W._Lines(W._coverage_keys(spec)) if stage == "original" else None
            try:
                with lines if lines is not None else contextlib.nullcontext():
                    results[stage] = _under_placement(spec, ctx, stage)
            except W.Failure as f:
                status = "cannot simulate" if "simulation_limit" in f.info else "failed"
                # when: a rank whose peer failed fails too (its collective
                # loses the connection), later
                results[stage] = {"status": status, "error": f.info, "at": time.time()}
            if lines is not None:
                results["lines"] = lines.result()
            write()
            if results[stage]["status"] != "ok":
                return EXIT_FAILED
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a harness bug: say so, for this rank
        results["harness_error"] = f"{type(exc).__name__}: {exc}"
        results["traceback"] = traceback.format_exc()
        write()
        return EXIT_HARNESS
    return 0


def main(argv: Sequence[str]) -> int:
    """``python -m devlint.harness.ddp SPEC``: one rank, as torchrun starts it."""
    with open(argv[0], encoding="utf-8") as fh:
        spec = json.load(fh)
    return run_rank(spec, int(os.environ["RANK"]))


# --------------------------------------------------------------------------
# the worker's side


def _launch(spec: dict, stages: List[str], deadline: float, real: bool, fork: bool) -> tuple:
    """One group running ``stages``; the group's result and each rank's.
    ``fork``: ranks forked from this process, else fresh interpreters."""
    spec = dict(spec, stages=stages, timeout=max(1.0, deadline - time.monotonic()))
    out = spec["out"]
    for name in os.listdir(out):
        os.unlink(os.path.join(out, name))
    timeout = spec["timeout"]
    if not fork:
        with open(os.path.join(spec["workdir"], "spec.json"), "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        env = None
        if real:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            env = {"CUDA_VISIBLE_DEVICES": visible if visible is not None else ",".join(map(str, range(spec["world_size"])))}
        group = launch([sys.executable, "-m", "devlint.harness.ddp", os.path.join(spec["workdir"], "spec.json")],
                       spec["world_size"], timeout, env=env)
    else:
        group = launch_function(lambda rank: run_rank(spec, rank), spec["world_size"], timeout)
    ranks: List[dict] = []
    for r in range(spec["world_size"]):
        try:
            with open(os.path.join(out, f"rank{r}.json"), encoding="utf-8") as fh:
                ranks.append(json.load(fh))
        except (OSError, ValueError):
            ranks.append({})
    return group, ranks


def _rank_status(group: GroupResult, ranks: List[dict], stage: str, r: int) -> dict:
    res = ranks[r].get(stage)
    if res is not None:
        out = {"rank": r, "status": res["status"]}
        if "error" in res:
            out["message"] = f"{res['error']['type']}: {res['error']['message']}"
        return out
    if r in group.stopped:
        return {"rank": r, "status": "stopped", "message": "stopped with its group"}
    return {"rank": r, "status": "no result", "message": describe_exit(group.returncodes[r])}


def _group_problem(group: GroupResult, ranks: List[dict], stage: str) -> Optional[tuple]:
    """A timeout, a crash or a harness error that left ``stage`` without a
    result on some rank: ``(key, message)`` for the case's result."""
    for r, res in enumerate(ranks):
        if "harness_error" in res:
            return "harness_error", f"rank {r}: {res['harness_error']}"
    if all(stage in res for res in ranks):
        return None
    if any(res.get(stage, {}).get("status") in ("failed", "cannot simulate") for res in ranks):
        return None  # the stage failed on a rank, which stopped the others
    where = STAGE_NAMES.get(stage, stage)
    if group.timed_out:
        return "timeout", f"{group.error_line()} ({where})"
    order = ([group.first_failed] if group.first_failed is not None else []) + list(range(len(ranks)))
    for r in order:
        code = group.returncodes[r]
        if code not in (0, EXIT_FAILED) and stage not in ranks[r] and r not in group.stopped:
            last = last_error(group.stderr[r])
            return "crash", f"rank {r} {describe_exit(code)} ({where})" + (f": {last}" if last else "")
    return "crash", f"no result from every rank ({where}): {group.error_line() or 'the group ended early'}"


def _merge_stage(group: GroupResult, ranks: List[dict], stage: str) -> dict:
    """The stage's result over the ranks: failed where one rank failed (the
    first failure in time), else cannot simulate where one could not be
    followed, else ok with every rank's outputs."""
    world = len(ranks)
    statuses = [_rank_status(group, ranks, stage, r) for r in range(world)]
    results = [res.get(stage) for res in ranks]
    # the first failure in time: the others may be its consequences
    failed = sorted((res for res in results if res and res["status"] == "failed"), key=lambda res: res.get("at", 0))
    limited = sorted((res for res in results if res and res["status"] == "cannot simulate"), key=lambda res: res.get("at", 0))
    if failed:
        return {"status": "failed", "error": failed[0]["error"], "ranks": statuses}
    if limited:
        return {"status": "cannot simulate", "error": limited[0]["error"], "ranks": statuses}
    outputs = []
    expected = []
    for r, res in enumerate(results):
        assert res is not None
        outputs += [dict(o, rank=r) for o in res["outputs"]]
        expected.append(res["expected_devices"])
    return {"status": "ok", "outputs": outputs, "expected_devices": expected, "ranks": statuses}


def _shape_problem(fixed: dict, references: List[Optional[list]]) -> Optional[str]:
    """The fixed run's outputs on each rank: on the expected device, with
    the shapes the fixed code gives on the CPU on that rank."""
    from devlint.harness import worker as W

    for r, expected in enumerate(fixed["expected_devices"]):
        outs = [o for o in fixed["outputs"] if o["rank"] == r]
        if not outs:
            return f"rank {r}: the case returned no tensors (and wrapped no model)"
        reference = references[r] if r < len(references) else None
        problem = W.outputs_problem(outs, set(expected), reference, "on the CPU")
        if problem is not None:
            return f"rank {r}: {problem}"
    return None


def _merge_equivalence(group: GroupResult, ranks: List[dict]) -> dict:
    results = [res.get("equivalence") for res in ranks]
    if any(res is None for res in results):
        missing = [r for r, res in enumerate(results) if res is None]
        return {"status": "not run", "detail": f"no result from rank {', '.join(map(str, missing))} ({group.error_line() or 'the group ended'})"}
    for status in ("error", "differs"):
        for r, res in enumerate(results):
            if res["status"] == status:
                return dict(res, detail=f"rank {r}: {res['detail']}")
    if any(res["status"] == "not applicable" for res in results):
        r, res = next((r, res) for r, res in enumerate(results) if res["status"] == "not applicable")
        return dict(res, detail=f"rank {r}: {res['detail']}")
    details = {res["detail"] for res in results}
    detail = results[0]["detail"] if len(details) == 1 else "; ".join(f"rank {r}: {res['detail']}" for r, res in enumerate(results))
    return {"status": "equal", "detail": f"on every rank, after the same steps: {detail}"}


def path_label(world: int, real: bool) -> str:
    if real:
        import torch

        return f"real ({world} ranks, nccl, {torch.cuda.get_device_name(0)})"
    return f"simulated ({world} ranks, gloo, fake cuda:<local_rank>)"


def _warm(world: int) -> None:
    """Import in the worker what every forked rank needs (the fake tensor
    mode alone imports torch._dynamo, 2 s on two cores), once rather than
    in every rank of every group."""
    from devlint.harness import ddp_env  # noqa: F401
    from devlint.harness import env as E

    E.Environment(E.make_plan(world, simulate=True))


def fork_ranks(gpus: int) -> bool:
    """Whether the ranks are forked from this process (milliseconds) rather
    than started as fresh interpreters (seconds): not where a GPU is visible
    (a process that may have used CUDA cannot fork one that does), and not
    where a forked rank's ``backward()`` would be refused
    (:func:`env.fork_breaks_autograd`)."""
    from devlint.harness import env as E

    return gpus == 0 and can_fork() and not E.fork_breaks_autograd()


def run_case(job: dict, name: str, meta: dict, timeout: float) -> dict:
    """The worker's run of a ``ddp`` case: the three steps over two groups,
    within ``timeout`` seconds, merged into one result."""
    from devlint.harness import env as E

    world = meta["devices"]
    gpus = 0 if job.get("simulate") else E.real_gpu_count()
    real = gpus >= world
    fork = fork_ranks(gpus)
    if fork:
        _warm(world)
    result: Dict[str, Any] = {"case": name, "placement": "ddp", "devices": world, "device_path": path_label(world, real)}
    deadline = time.monotonic() + max(1.0, timeout - MARGIN)
    with tempfile.TemporaryDirectory(prefix="devlint-ddp-") as tmp:
        out = os.path.join(tmp, "results")
        os.makedirs(out)
        spec = {
            "original": os.path.abspath(job["original"]),
            "fixed": os.path.abspath(job["fixed"]),
            "display": job["display"],
            "fixed_display": job["fixed_display"],
            "project": job.get("project"),
            "search_path": job.get("search_path", []),
            "case": name,
            "world_size": world,
            "real": real,
            "workdir": tmp,
            "out": out,
        }
        group, ranks = _launch(spec, ["original"], deadline, real, fork)
        result["reached"] = _reached(ranks)
        problem = _group_problem(group, ranks, "original")
        if problem:
            result[problem[0]] = problem[1]
            return result
        original = _merge_stage(group, ranks, "original")
        result["original"] = _original(original)
        if job.get("same"):
            result["fixed"] = {"status": "unchanged", "detail": "devlint changed nothing in the files this case runs"}
            return result
        group, ranks = _launch(spec, ["fixed", "equivalence"], deadline, real, fork)
        problem = _group_problem(group, ranks, "fixed")
        if problem:
            result[problem[0]] = problem[1]
            return result
        fixed = _merge_stage(group, ranks, "fixed")
        equivalence = _merge_equivalence(group, ranks)
        references = [(res.get("equivalence") or {}).get("reference") for res in ranks]
        equivalence.pop("reference", None)
        result["fixed"] = _fixed(fixed, references)
        result["equivalence"] = equivalence
    return result


def _reached(ranks: List[dict]) -> Dict[str, List[int]]:
    """The lines of the original any rank executed."""
    lines: Dict[str, set] = {}
    for res in ranks:
        for key, numbers in (res.get("lines") or {}).items():
            lines.setdefault(key, set()).update(numbers)
    return {k: sorted(v) for k, v in lines.items()}


def _original(stage: dict) -> dict:
    if stage["status"] == "failed":
        return {"status": "reproduced", "error": stage["error"], "ranks": stage["ranks"]}
    if stage["status"] == "cannot simulate":
        return {"status": "cannot simulate", "detail": stage["error"]["simulation_limit"], "error": stage["error"], "ranks": stage["ranks"]}
    return {"status": "not reproduced", "detail": "ran without error on every rank", "outputs": stage["outputs"], "ranks": stage["ranks"]}


def _fixed(stage: dict, references: List[Optional[list]]) -> dict:
    if stage["status"] != "ok":
        return {"status": stage["status"], "error": stage["error"], "ranks": stage["ranks"]}
    problem = _shape_problem(stage, references)
    out = {"status": "ok" if problem is None else "wrong output", "outputs": stage["outputs"], "ranks": stage["ranks"]}
    if problem:
        out["detail"] = problem
    return out


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no destructors: see ddp_env.Rank.kept
