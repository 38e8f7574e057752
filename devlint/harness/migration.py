"""Running a DataParallel training script and its ``devlint migrate ddp``
migration, and comparing what they computed (docs/migrate.md, "How the
migration is checked").

The migrated script runs first, as N gloo ranks on the CPU started the way
torchrun starts them (:func:`devlint.harness.distributed.launch_script`);
then the original runs as one process, its shuffled DataLoader replaying the
order the migrated script's DistributedSampler drew (so both see the same
global batches), with one thread as torchrun gives each rank. Both run under
:mod:`devlint.harness.trainrecord`, which records the loss of every step and
the parameters at the end. Each runs in a folder of its own, so checkpoints
they write do not meet.

With the global batch kept (the default migration: each rank loads
``batch // world_size``), step ``k``'s loss of the original equals the mean
of the ranks' step-``k`` losses, and the parameters after the last step are
equal, up to floating-point summation order: DDP averages the ranks'
gradients, each a mean over half the batch, where the original takes one
mean over the whole batch. :data:`TOLERANCE` bounds that difference
(losses relative to their size, parameters absolute).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence

from devlint.harness.distributed import GroupResult, launch_script

RECORDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainrecord.py")
#: float32: the summation order over a few steps; measured at most 1.2e-7 on
#: parameters and 1.9e-7 relative on losses (docs/migrate.md)
TOLERANCE = 1e-5
#: bfloat16 autocast: a half batch and a whole one round differently (8 bits
#: of mantissa); measured 6.7e-5 on parameters, 2.6e-5 on losses after 8 steps
BF16_TOLERANCE = 1e-3

@dataclass
class Comparison:
    """What running a script and its migration showed."""

    original: str
    migrated: str
    world_size: int
    #: optimiser steps (losses recorded) of the original; the migrated ranks took as many
    steps: int = 0
    #: max over steps of |original loss - mean of the ranks' losses| / max(1, |original loss|)
    loss_diff: float = 0.0
    #: max |original parameter - rank 0's| after the last step
    param_diff: float = 0.0
    #: max |rank 0's parameter - another rank's|: DDP keeps them identical
    rank_param_diff: float = 0.0
    #: the DistributedSampler's passes, per epoch it was set to (None: it does not shuffle)
    epochs: Optional[List[int]] = None
    #: whether passes of different epochs drew different orders (set_epoch at work)
    reshuffled: Optional[bool] = None
    seconds: float = 0.0
    error: Optional[str] = None
    losses: Dict[str, List[float]] = field(default_factory=dict)
    #: what each rank of the migrated script wrote to stdout and stderr
    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)

    def within(self, tolerance: float = TOLERANCE) -> bool:
        return (self.error is None and self.steps > 0 and self.loss_diff <= tolerance
                and self.param_diff <= tolerance and self.rank_param_diff == 0.0)

    def summary(self) -> str:
        if self.error is not None:
            return f"{os.path.basename(self.original)}: {self.error}"
        return (f"{os.path.basename(self.original)}: {self.steps} steps on {self.world_size} ranks, "
                f"loss diff {self.loss_diff:.1e} (relative), param diff {self.param_diff:.1e}, "
                f"ranks equal: {self.rank_param_diff == 0.0}, reshuffled each epoch: {self.reshuffled} "
                f"({self.seconds:.1f}s)")


def compare_training(
    original: str,
    migrated: str,
    argv: Sequence[str] = (),
    original_argv: Optional[Sequence[str]] = None,
    nprocs: int = 2,
    timeout: float = 180.0,
    original_files: Mapping[str, str] = {},
    migrated_files: Mapping[str, str] = {},
) -> Comparison:
    """Run ``migrated`` on ``nprocs`` gloo ranks and ``original`` as one
    process, both with ``argv`` (the original with ``original_argv`` when
    given: ``--batch-size`` doubled to compare a ``--per-rank-batch``
    migration), and compare them. ``*_files``: name -> path of files to
    copy into the run's folder first (a checkpoint to resume from)."""
    result = Comparison(original=original, migrated=migrated, world_size=nprocs)
    with tempfile.TemporaryDirectory(prefix="devlint-migrate-") as tmp:
        folders = {side: os.path.join(tmp, side) for side in ("ddp", "dp", "ddp-record", "dp-record")}
        for folder in folders.values():
            os.mkdir(folder)
        for files, where in ((migrated_files, folders["ddp"]), (original_files, folders["dp"])):
            for name, source in files.items():
                shutil.copy(source, os.path.join(where, name))
        group = launch_script(RECORDER, [os.path.abspath(migrated), *argv], nprocs=nprocs, timeout=timeout,
                              env={"DEVLINT_RECORD_DIR": folders["ddp-record"]}, cwd=folders["ddp"])
        result.seconds += group.seconds
        result.stdout, result.stderr = list(group.stdout), list(group.stderr)
        if not group.ok:
            result.error = f"the migrated script failed: {group.error_line()}{_tail(group)}"
            return result
        ranks = [_load(folders["ddp-record"], r) for r in range(nprocs)]
        orders, problem = _global_orders(ranks)
        if problem:
            result.error = problem
            return result
        replay = os.path.join(tmp, "orders.json")
        with open(replay, "w") as fh:
            json.dump([o["indices"] for o in orders if o["shuffle"]], fh)
        single = launch_script(
            RECORDER, [os.path.abspath(original), *(argv if original_argv is None else original_argv)], nprocs=1,
            timeout=timeout, cwd=folders["dp"],
            env={"DEVLINT_RECORD_DIR": folders["dp-record"], "DEVLINT_REPLAY_ORDERS": replay, "OMP_NUM_THREADS": "1"},
        )
        result.seconds += single.seconds
        if not single.ok:
            result.error = f"the original script failed: {single.error_line()}{_tail(single)}"
            return result
        base = _load(folders["dp-record"], 0)
    shuffled = [o for o in orders if o["shuffle"]]
    if base["replayed"] != len(shuffled):
        result.error = (f"the original made {base['replayed']} passes over shuffled data, the migrated script "
                        f"{len(shuffled)}: they do not train on the same batches")
        return result
    if shuffled:
        result.epochs = [o["epoch"] for o in shuffled]
        by_epoch: Dict[int, List[int]] = {}
        for o in shuffled:
            by_epoch.setdefault(o["epoch"], o["indices"])
        result.reshuffled = len(by_epoch) > 1 and len({tuple(v) for v in by_epoch.values()}) == len(by_epoch)
    _compare(result, base, ranks)
    return result


def _compare(result: Comparison, base: dict, ranks: List[dict]) -> None:
    steps = [len(r["losses"]) for r in ranks]
    result.steps = len(base["losses"])
    result.losses = {"original": base["losses"], **{f"rank{i}": r["losses"] for i, r in enumerate(ranks)}}
    if any(s != result.steps for s in steps):
        result.error = f"the original took {result.steps} steps, the ranks {steps}"
        return
    if base["params"] is None or any(r["params"] is None for r in ranks):
        result.error = "no optimiser was built: nothing to compare"
        return
    mean = [sum(r["losses"][k] for r in ranks) / len(ranks) for k in range(result.steps)]
    result.loss_diff = max((abs(a - b) / max(1.0, abs(a)) for a, b in zip(base["losses"], mean)), default=0.0)
    shapes = [[len(p) for p in r["params"]] for r in (base, *ranks)]
    if any(s != shapes[0] for s in shapes):
        result.error = "the original and the migrated script train parameters of different shapes"
        return
    result.param_diff = _max_diff(base["params"], ranks[0]["params"])
    result.rank_param_diff = max((_max_diff(ranks[0]["params"], r["params"]) for r in ranks[1:]), default=0.0)


def _global_orders(ranks: List[dict]):
    """Each pass's global order: the ranks' indices interleaved (rank r takes
    every world_size-th index of the sampler's order, from the r-th)."""
    passes = {len(r["orders"]) for r in ranks}
    if len(passes) != 1:
        return [], f"the ranks made different numbers of passes over the data ({sorted(passes)})"
    out = []
    for k in range(passes.pop()):
        parts = [r["orders"][k] for r in ranks]
        order = [i for group in zip(*(p["indices"] for p in parts)) for i in group]
        if len(order) != parts[0]["size"]:
            return [], (f"the training set's {parts[0]['size']} samples do not split evenly over {len(ranks)} ranks: "
                        "DistributedSampler repeats some, so the two runs do not see the same batches")
        out.append({**parts[0], "indices": order})
    return out, None


def _max_diff(a: List[List[float]], b: List[List[float]]) -> float:
    return max((abs(x - y) for pa, pb in zip(a, b) for x, y in zip(pa, pb)), default=0.0)


def _load(folder: str, rank: int) -> dict:
    with open(os.path.join(folder, f"rank{rank}.json")) as fh:
        return json.load(fh)


def _tail(group: GroupResult) -> str:
    rank = group.first_failed if group.first_failed is not None else 0
    lines = [ln for ln in group.stderr[rank].splitlines() if ln.strip() and "NumPy" not in ln and "_conversion_method" not in ln]
    return ("\n" + "\n".join(lines[-12:])) if lines else ""
