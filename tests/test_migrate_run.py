"""Every migrated script of ``fixtures/migrate/`` run for real: two gloo
ranks on the CPU, launched as torchrun launches them, compared with its
DataParallel original on the same global batches (devlint.harness.migration,
docs/migrate.md "How the migration is checked").

Each comparison starts three or four Python processes that import torch (a
DDP rank also imports torch._dynamo, which DistributedDataParallel's
constructor pulls in): they run two at a time and the results are shared by
the tests below.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import FIXTURES

torch = pytest.importorskip("torch")

from devlint.harness.distributed import launch_script  # noqa: E402
from devlint.harness.migration import BF16_TOLERANCE, TOLERANCE, compare_training  # noqa: E402

MIGRATE = FIXTURES / "migrate"
#: name -> (the original's arguments, the migrated script's arguments when
#: they differ, the migrated file, the tolerance)
RUNS = {
    "mnist_argparse": ([], None, "mnist_argparse.migrated.py", TOLERANCE),
    # --per-rank-batch: each rank keeps the old batch, so the original with
    # twice the batch trains on the same global batches
    "mnist_argparse.per_rank": (["--batch-size", "32"], ["--batch-size", "16"], "mnist_argparse.per_rank.migrated.py", TOLERANCE),
    "trainer_class": (["2", "1"], None, "trainer_class.migrated.py", TOLERANCE),
    # bfloat16 autocast on the CPU with a real GradScaler
    "amp_grad_scaler": (["--amp"], None, "amp_grad_scaler.migrated.py", BF16_TOLERANCE),
    "eval_best_logging": ([], None, "eval_best_logging.migrated.py", TOLERANCE),
    "config_scheduler": ([], None, "config_scheduler.migrated.py", TOLERANCE),
    "tutorial_flat": ([], None, "tutorial_flat.migrated.py", TOLERANCE),
    "resume_checkpoint": (["--epochs", "2", "--resume", "last.pt", "--out", "out"], None,
                          "resume_checkpoint.migrated.py", TOLERANCE),
}


def _resume_from_epoch_one(tmp) -> dict:
    """Both sides resume from the checkpoint the original wrote after one
    epoch; the migrated side reads it after the conversion the migration's
    note gives (DataParallel's ``module.`` prefix dropped)."""
    first = launch_script(str(MIGRATE / "resume_checkpoint.py"), ["--epochs", "1", "--out", str(tmp)], nprocs=1,
                          env={"OMP_NUM_THREADS": "1"}, cwd=str(tmp))
    assert first.ok, first.error_line()
    original = tmp / "last.pt"
    state = torch.load(original, map_location="cpu")
    assert all(k.startswith("module.") for k in state["model"])
    torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state["model"], "module.")
    migrated = tmp / "last.ddp.pt"
    torch.save(state, migrated)
    return {"original_files": {"last.pt": str(original)}, "migrated_files": {"last.pt": str(migrated)}}


@pytest.fixture(scope="module")
def comparisons(request, tmp_path_factory):
    """The comparisons of the tests this session runs, two at a time."""
    selected = [n for n in RUNS if any(getattr(item, "callspec", None) is not None and item.callspec.params.get("name") == n
                                       for item in request.session.items)]

    def run(name):
        args, migrated_args, migrated, _ = RUNS[name]
        original = MIGRATE / (name.split(".")[0] + ".py")
        extra = _resume_from_epoch_one(tmp_path_factory.mktemp("resume")) if name == "resume_checkpoint" else {}
        return compare_training(str(original), str(MIGRATE / migrated), migrated_args if migrated_args is not None else args,
                                original_argv=args, **extra)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(selected, pool.map(run, selected)))


def test_every_migrated_fixture_is_run():
    scripts = {p.name for p in MIGRATE.glob("*.migrated.py")}
    assert scripts == {r[2] for r in RUNS.values()}


@pytest.mark.parametrize("name", list(RUNS))
def test_migrated_script_trains_as_the_original(comparisons, name):
    result = comparisons[name]
    tolerance = RUNS[name][3]
    print(result.summary())
    assert result.error is None, result.error
    assert result.steps >= 4
    assert result.rank_param_diff == 0.0, "DDP ranks hold different parameters"
    assert result.loss_diff <= tolerance and result.param_diff <= tolerance, result.summary()
    # shuffle=True moved to the DistributedSampler, and set_epoch reshuffles every epoch
    if name == "resume_checkpoint":
        # one epoch of four steps after resuming at epoch 1 of 2, set_epoch(1)
        assert result.steps == 4 and result.epochs == [1]
    else:
        assert result.reshuffled is True, result.epochs
    # printing and logging.info on rank 0 only (a warning stays on every rank)
    assert not result.stdout[1].strip(), result.stdout[1][:300]
    if name == "eval_best_logging":
        assert "train loss" in result.stderr[0] and "train loss" not in result.stderr[1]
        assert "finished: best val acc" in result.stderr[1]
    else:
        assert result.stdout[0].strip()
