"""``devlint migrate ddp`` (docs/migrate.md), on the scripts of
``fixtures/migrate/``:

* ``NAME.py``: a DataParallel training script in the shape of a public
  tutorial or research repository; ``NAME.migrated.py`` the expected
  migration (``mnist_argparse.per_rank.migrated.py``: with
  ``--per-rank-batch``);
* ``refuse_NAME.py``: a script the codemod must refuse, with the expected
  ``LINE: reason`` in ``refuse_NAME.txt``.

Set ``DEVLINT_UPDATE_SNAPSHOTS=1`` to rewrite the snapshots after a reviewed
change. The migrated scripts are run for real on two gloo ranks and compared
with their originals in ``tests/test_migrate_run.py``.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from clirun import cli
from conftest import FIXTURES, check_snapshot
from devlint.engine import lint_source
from devlint.migrate import CannotMigrate, migrate_ddp
from devlint.rule import all_rules

MIGRATE = FIXTURES / "migrate"
SCRIPTS = sorted(p for p in MIGRATE.glob("*.py") if p.name.count(".") == 1 and not p.name.startswith("refuse_"))
REFUSALS = sorted(MIGRATE.glob("refuse_*.py"))
#: what a migrated script must not contain (the issue's proof)
DDP_RULES = ("DL003", "DL005", "DL010", "DL011", "DL012")


def _migrated_name(path: Path, per_rank: bool = False) -> Path:
    return path.with_name(path.stem + (".per_rank" if per_rank else "") + ".migrated.py")


CASES = [(p, False) for p in SCRIPTS] + [(MIGRATE / "mnist_argparse.py", True)]
IDS = [_migrated_name(p, per_rank).name for p, per_rank in CASES]


def test_corpus_size():
    assert len(SCRIPTS) >= 6 and len(REFUSALS) >= 3


@pytest.mark.parametrize("path,per_rank", CASES, ids=IDS)
def test_migration_snapshot(path, per_rank):
    migration = migrate_ddp(path.read_text(), str(path), per_rank_batch=per_rank)
    check_snapshot(_migrated_name(path, per_rank), migration.text)


@pytest.mark.parametrize("path,per_rank", CASES, ids=IDS)
def test_migrated_script_passes_check(path, per_rank):
    text = _migrated_name(path, per_rank).read_text()
    codes = [c for c, r in all_rules().items() if r.enabled_by_default]
    result = lint_source(text, path.name, codes)
    assert not result.internal_errors
    found = [f"{d.line}: {d.code} {d.message}" for d in result.diagnostics if d.code in DDP_RULES or d.code == "DL000"]
    assert not found, found


@pytest.mark.parametrize("path,per_rank", CASES, ids=IDS)
def test_migrated_script_shape(path, per_rank):
    """The parts every migration writes, and no collective call on rank 0 alone."""
    text = _migrated_name(path, per_rank).read_text()
    module = cst.parse_module(text)
    code = module.code
    assert code.startswith("# ") or "\n# Migrated from nn.DataParallel" in code
    assert "torchrun --nproc_per_node=N" in code
    assert code.count("dist.init_process_group(") == 1 and code.count("dist.destroy_process_group()") >= 1
    assert 'init_method="env://"' in code and '"nccl" if torch.cuda.is_available() else "gloo"' in code
    assert "torch.cuda.set_device(local_rank)" in code
    assert "device_ids=[local_rank] if torch.cuda.is_available() else None" in code
    assert ".sampler.set_epoch(" in code and "DistributedSampler(" in code
    assert "DataParallel(" not in code.replace("DistributedDataParallel(", "")
    assert ("times larger: scale the learning rate" if per_rank else "--per-rank-batch: the whole batch per rank") in code
    for guard in _rank0_blocks(module):
        for call in _calls(guard):
            name = _name(call.func)
            assert not name.startswith("dist.") or name == "dist.get_rank", f"collective {name} on rank 0 alone"
            assert name not in ("model", "self.model"), "the DDP model runs on rank 0 alone"


def test_migration_of_a_migrated_script_is_refused():
    text = _migrated_name(MIGRATE / "mnist_argparse.py").read_text()
    with pytest.raises(CannotMigrate, match="already uses torch.distributed"):
        migrate_ddp(text, "mnist_argparse.py")


@pytest.mark.parametrize("path", REFUSALS, ids=[p.name for p in REFUSALS])
def test_refusal_reason(path):
    with pytest.raises(CannotMigrate) as info:
        migrate_ddp(path.read_text(), str(path))
    exc = info.value
    check_snapshot(path.with_suffix(".txt"), f"{exc.line}: {exc.reason}\n" if exc.line else f"{exc.reason}\n")


# --------------------------------------------------------------- shapes


def _migrate(src: str, **kw) -> str:
    """The migrated text, with calls the codemod spread over lines joined again."""
    text = migrate_ddp(textwrap.dedent(src).lstrip("\n"), "train.py", **kw).text
    return re.sub(r",\s*\)", ")", re.sub(r"\(\s+", "(", re.sub(r",\n\s+", ", ", text)))


def _refused(src: str) -> str:
    with pytest.raises(CannotMigrate) as info:
        migrate_ddp(textwrap.dedent(src).lstrip("\n"), "train.py")
    return info.value.reason


SCRIPT = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=16, shuffle=True)
    model = nn.DataParallel(nn.Linear(4, 1).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
{extra}

if __name__ == "__main__":
    main()
"""


def _script(extra: str = "", **replace: str) -> str:
    src = SCRIPT.replace("{extra}", textwrap.indent(textwrap.dedent(extra).strip("\n"), "    ") if extra else "")
    for old, new in replace.items():
        assert old in src, old
        src = src.replace(old, new)
    return src


def test_plain_script_migrates():
    out = _migrate(_script())
    assert "model = DistributedDataParallel(nn.Linear(4, 1).to(device), device_ids=" in out
    assert "batch_size=16 // dist.get_world_size(), sampler=DistributedSampler(train_dataset, shuffle=True)" in out
    assert "train_dataset = TensorDataset(" in out  # built once, for the loader and the sampler


def test_no_shuffle_is_kept_explicitly():
    # DistributedSampler shuffles by default; a loader that did not, still does not
    out = _migrate(_script(**{", shuffle=True)": ")"}))
    assert "DistributedSampler(train_dataset, shuffle=False)" in out


def test_per_rank_batch_keeps_the_batch():
    out = _migrate(_script(), per_rank_batch=True)
    assert "batch_size=16, sampler=" in out and "times larger" in out


def test_nproc_in_the_launch_command():
    out = _migrate(_script(), nproc=4)
    assert "#     torchrun --nproc_per_node=4 train.py [ARGS]" in out


def test_loader_with_a_sampler_is_refused():
    reason = _refused(_script(**{"shuffle=True)": "sampler=torch.utils.data.RandomSampler(range(64)))"}))
    assert "has its own sampler" in reason


def test_loader_with_unpacked_options_is_refused():
    reason = _refused(_script(**{"batch_size=16, shuffle=True)": "**loader_kwargs)"}))
    assert "cannot see its batch size" in reason


def test_no_dataparallel_is_refused():
    assert "nothing to migrate" in _refused(_script(**{"nn.DataParallel(nn.Linear(4, 1).to(device))": "nn.Linear(4, 1).to(device)"}))


def test_optimiser_over_another_model_is_refused():
    src = _script(**{"model.parameters(), lr=0.1)": "head.parameters(), lr=0.1)\n    head = nn.Linear(1, 1)"})
    assert "not the model wrapped in DataParallel" in _refused(src)


def test_several_optimisers_are_refused():
    src = _script(**{"    for epoch": "    second = torch.optim.Adam(model.parameters())\n    for epoch"})
    assert "several optimisers" in _refused(src)


def test_one_optimiser_chosen_in_branches_is_fine():
    src = _script(**{
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n":
        "    if True:\n        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    else:\n        optimizer = torch.optim.Adam(model.parameters())\n",
    })
    assert "DistributedDataParallel(" in _migrate(src)


def test_module_call_in_evaluation_is_fine():
    out = _migrate(_script("""
        with torch.no_grad():
            print(model.module(torch.zeros(1, 4)))
    """))
    assert "model.module(torch.zeros(1, 4))" in out


def test_module_alias_called_in_training_is_refused():
    src = _script(**{"model(x.to(device))": "net(x.to(device))", "    for epoch": "    net = model.module\n    for epoch"})
    assert "taken out of its wrapper" in _refused(src)


def test_gpu_other_than_the_first_is_refused():
    src = _script(**{'torch.device("cuda" if': 'torch.device("cuda:1" if'})
    assert "cuda:1" in _refused(src)


def test_cuda_zero_becomes_the_rank():
    out = _migrate(_script(**{'torch.device("cuda" if': 'torch.device("cuda:0" if'}))
    assert 'torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")' in out


def test_set_device_in_the_script_is_refused():
    src = _script(**{"    device =": "    torch.cuda.set_device(0)\n    device ="})
    assert "sets the CUDA device itself" in _refused(src)


def test_no_epoch_loop_is_refused():
    src = _script(**{"    for epoch in range(2):\n        for x, y in loader:": "    if True:\n        for x, y in loader:"})
    assert "no epoch loop" in _refused(src)


def test_zipped_loaders_are_refused():
    src = _script(**{"for x, y in loader:": "for (x, y), _ in zip(loader, loader):"})
    assert "zips several loaders" in _refused(src)


def test_loader_built_in_the_epoch_loop_is_refused():
    src = _script(**{
        "    loader = DataLoader(": "    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))\n    unused = DataLoader(",
        "    for epoch in range(2):\n": "    for epoch in range(2):\n        loader = DataLoader(data, batch_size=16)\n",
    })
    assert "inside the epoch loop" in _refused(src)


def test_wrap_with_an_else_branch_is_refused():
    src = _script(**{
        "    model = nn.DataParallel(nn.Linear(4, 1).to(device))\n":
        "    model = nn.Linear(4, 1).to(device)\n    if torch.cuda.device_count() > 1:\n"
        "        model = nn.DataParallel(model)\n    else:\n        model = model.float()\n",
    })
    assert "one branch of" in _refused(src)


def test_wrap_condition_guarding_other_code_is_refused():
    src = _script(**{
        "    model = nn.DataParallel(nn.Linear(4, 1).to(device))\n":
        "    model = nn.Linear(4, 1).to(device)\n    if torch.cuda.device_count() > 1:\n"
        "        model = nn.DataParallel(model)\n        batch = 64\n",
    })
    assert "also runs `batch = 64`" in _refused(src)


def test_conditional_expression_wrap():
    src = _script(**{
        "nn.DataParallel(nn.Linear(4, 1).to(device))":
        "nn.Linear(4, 1).to(device)\n    model = nn.DataParallel(model) if torch.cuda.device_count() > 1 else model",
    })
    out = _migrate(src)
    assert "model = DistributedDataParallel(model, device_ids=" in out and "device_count" not in out


def test_wrap_then_move_moves_first():
    src = _script(**{"nn.DataParallel(nn.Linear(4, 1).to(device))": "nn.DataParallel(nn.Linear(4, 1)).cuda()"})
    assert "DistributedDataParallel(nn.Linear(4, 1).cuda(), device_ids=" in _migrate(src)


def test_model_never_moved_is_moved_to_the_device():
    src = _script(**{"nn.DataParallel(nn.Linear(4, 1).to(device))": "nn.DataParallel(nn.Linear(4, 1))"})
    assert "DistributedDataParallel(nn.Linear(4, 1).to(device), device_ids=" in _migrate(src)


def test_checkpoint_helper_is_called_on_rank_zero():
    src = _script("save_checkpoint(model, 'last.pt')") + textwrap.dedent("""

        def save_checkpoint(model, path):
            torch.save({"model": model.state_dict()}, path)
            print("saved", path)
    """)
    out = _migrate(src)
    assert "    if dist.get_rank() == 0:\n        save_checkpoint(model, 'last.pt')" in out
    assert '    torch.save({"model": model.module.state_dict()}, path)\n    print("saved", path)' in out


def test_print_that_runs_the_model_stays_on_every_rank():
    migration = migrate_ddp(textwrap.dedent(_script("print(evaluate(model))")).lstrip("\n") + textwrap.dedent("""

        @torch.no_grad()
        def evaluate(model):
            return model(torch.zeros(2, 4)).sum().item()
    """), "train.py")
    assert "\n    print(evaluate(model))" in migration.text
    assert any("stays on every rank" in n for n in migration.notes)


def test_summed_loss_is_noted():
    src = textwrap.dedent(_script(**{"nn.functional.mse_loss(model(x.to(device)), y.to(device))":
                                     "nn.functional.mse_loss(model(x.to(device)), y.to(device), reduction=\"sum\")"})).lstrip("\n")
    notes = migrate_ddp(src, "train.py").notes
    assert any("summed over the batch" in n and "world_size times smaller" in n for n in notes)
    assert not any("summed" in n for n in migrate_ddp(textwrap.dedent(_script()).lstrip("\n"), "train.py").notes)


def test_load_onto_the_rank_device():
    out = _migrate(_script("model.load_state_dict(torch.load('last.pt'))"))
    assert "model.module.load_state_dict(torch.load('last.pt', map_location=device))" in out


def test_load_onto_cuda_zero_is_moved_to_the_rank():
    out = _migrate(_script("state = torch.load('last.pt', map_location='cuda:0')"))
    assert "torch.load('last.pt', map_location=device)" in out


def test_isinstance_checks_follow_the_new_wrapper():
    out = _migrate(_script("net = model.module if isinstance(model, nn.DataParallel) else model"))
    assert "isinstance(model, DistributedDataParallel)" in out


def test_functions_reading_module_level_names_are_refused():
    assert "`train()` reads the module-level `loader`" in _refused("""
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=16, shuffle=True)
        model = nn.DataParallel(nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


        def train():
            for x, y in loader:
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()


        for epoch in range(2):
            train()
    """)


def test_not_a_script():
    assert "not a script" in _refused("""
        import torch.nn as nn
        import torch

        def make():
            model = nn.DataParallel(nn.Linear(1, 1))
            opt = torch.optim.SGD(model.parameters(), lr=1)
            for epoch in range(2):
                for x in make_loader():
                    model(x).sum().backward()
                    opt.step()
    """)


def test_syntax_error():
    with pytest.raises(CannotMigrate, match="syntax error") as info:
        migrate_ddp("def f(:\n    pass\n", "train.py")
    assert info.value.line == 1


def test_dataparallel_imported_by_name_is_dropped():
    out = _migrate(_script(**{
        "from torch.utils.data import": "from torch.nn import DataParallel\nfrom torch.utils.data import",
        "nn.DataParallel(nn.Linear(4, 1).to(device))": "DataParallel(nn.Linear(4, 1).to(device))",
    }))
    assert "import DataParallel" not in out and "model = DistributedDataParallel(" in out


def test_device_chosen_in_a_class_binds_the_rank_there():
    out = _migrate("""
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset


        class Trainer:
            def __init__(self, model):
                self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                self.model = nn.DataParallel(model.to(self.device))
                self.loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4, shuffle=True)
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def fit(self, epochs):
                for epoch in range(epochs):
                    for (x,) in self.loader:
                        self.model(x.to(self.device)).sum().backward()
                        self.opt.step()
                torch.save(self.model.state_dict(), "last.pt")


        if __name__ == "__main__":
            Trainer(nn.Linear(2, 1)).fit(2)
    """)
    assert ('    def __init__(self, model):\n        local_rank = int(os.environ["LOCAL_RANK"])\n'
            '        self.device = torch.device(f"cuda:{local_rank}" if') in out
    assert "self.loader.sampler.set_epoch(epoch)" in out
    assert "if dist.get_rank() == 0:\n            torch.save(self.model.module.state_dict(), \"last.pt\")" in out
    # the code under the main guard became main(), which starts the process group
    assert "def main():\n    # DDP: torchrun" in out and "    Trainer(nn.Linear(2, 1)).fit(2)\n    dist.destroy_process_group()" in out


def test_module_level_device_binds_the_rank_at_import():
    src = _script(**{
        "\n\ndef main():\n    device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n":
        "\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n\ndef main():\n",
    })
    out = migrate_ddp(textwrap.dedent(src).lstrip("\n"), "train.py").text
    # at import: a default keeps `--help` and imports working without torchrun
    assert ('# DDP: this process\'s GPU (torchrun sets LOCAL_RANK; 0 when imported without it)\n'
            'local_rank = int(os.environ.get("LOCAL_RANK", 0))\n'
            'device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")\n') in out
    assert out.count("dist.init_process_group(") == 1


def test_load_without_a_device_name_is_wrapped_when_long():
    out = migrate_ddp(textwrap.dedent(_script("net.load_state_dict(torch.load('a_rather_long_checkpoint_name.pt'))")
                                      .replace("model.load", "net.load")).lstrip("\n")
                      .replace('    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n', "")
                      .replace(".to(device)", ".cuda()"), "train.py").text
    assert ("    net.load_state_dict(torch.load(\n        'a_rather_long_checkpoint_name.pt',\n"
            '        map_location=f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu",\n    ))\n') in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_dist_name_taken_uses_another_alias():
    out = _migrate(_script("dist = torch.cdist(torch.zeros(1, 2), torch.zeros(1, 2))"))
    assert "import torch.distributed as torch_dist" in out and "torch_dist.init_process_group(" in out


# ------------------------------------------------------------------- CLI


def test_cli_prints_a_diff_and_changes_nothing(tmp_path):
    script = tmp_path / "mnist_argparse.py"
    original = (MIGRATE / "mnist_argparse.py").read_text()
    script.write_text(original)
    out = cli("migrate", "ddp", "mnist_argparse.py", cwd=tmp_path)
    assert out.code == 1
    assert out.stdout.startswith("--- a/mnist_argparse.py\n+++ b/mnist_argparse.py\n")
    assert "+    dist.init_process_group(" in out.stdout
    assert "warning: migrating to DistributedDataParallel is an unsafe change" in out.stderr
    assert "Would migrate mnist_argparse.py; launch it with: torchrun --nproc_per_node=N mnist_argparse.py" in out.stderr
    assert script.read_text() == original


def test_cli_diff_applies_with_patch(tmp_path):
    import shutil
    import subprocess

    script = tmp_path / "trainer_class.py"
    shutil.copy(MIGRATE / "trainer_class.py", script)
    out = cli("migrate", "ddp", "trainer_class.py", cwd=tmp_path)
    if shutil.which("patch") is None:
        pytest.skip("no patch(1)")
    subprocess.run(["patch", "-p1", "-s"], input=out.stdout, text=True, cwd=tmp_path, check=True)
    assert script.read_text() == _migrated_name(MIGRATE / "trainer_class.py").read_text()


def test_cli_apply_writes_and_warns(tmp_path):
    script = tmp_path / "resume_checkpoint.py"
    script.write_text((MIGRATE / "resume_checkpoint.py").read_text())
    script.chmod(0o750)
    out = cli("migrate", "ddp", "--apply", str(script))
    assert out.code == 0, out.output
    assert "warning: migrating to DistributedDataParallel is an unsafe change" in out.stderr
    assert out.stdout.startswith(f"Migrated {script}; launch it with: torchrun --nproc_per_node=N resume_checkpoint.py")
    assert script.read_text() == _migrated_name(MIGRATE / "resume_checkpoint.py").read_text()
    assert oct(script.stat().st_mode & 0o777) == oct(0o750)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".devlint-")]
    again = cli("migrate", "ddp", "--apply", str(script))
    assert again.code == 1 and "already uses torch.distributed" in again.stderr


def test_cli_per_rank_batch_and_nproc(tmp_path):
    script = tmp_path / "mnist_argparse.py"
    script.write_text((MIGRATE / "mnist_argparse.py").read_text())
    out = cli("migrate", "ddp", "--apply", "--per-rank-batch", "--nproc", "8", str(script))
    assert out.code == 0
    text = script.read_text()
    assert "torchrun --nproc_per_node=8 mnist_argparse.py" in text and "batch_size=args.batch_size,\n" in text


def test_cli_keeps_crlf_and_encoding(tmp_path):
    script = tmp_path / "train.py"
    src = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + textwrap.dedent(_script()).lstrip("\n")
    script.write_bytes(src.replace("\n", "\r\n").encode("latin-1"))
    assert cli("migrate", "ddp", "--apply", str(script)).code == 0
    data = script.read_bytes()
    assert b"caf\xe9" in data and b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert b"dist.init_process_group(" in data


@pytest.mark.parametrize("name", [p.name for p in REFUSALS])
def test_cli_refusal_leaves_the_file_alone(tmp_path, name):
    script = tmp_path / name
    original = (MIGRATE / name).read_bytes()
    script.write_bytes(original)
    for args in (["migrate", "ddp", str(script)], ["migrate", "ddp", "--apply", str(script)]):
        out = cli(*args)
        assert out.code == 1 and out.stdout == ""
        lines = out.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"devlint: error: {script}:"), lines
        assert "cannot migrate to DistributedDataParallel" in lines[0] and lines[0].endswith("nothing was written")
    assert script.read_bytes() == original


@pytest.mark.parametrize("content,args,code,message", [
    (None, ["missing.py"], 2, "missing.py: no such file or directory"),
    (b"def f(:\n", ["bad.py"], 1, "bad.py:1: cannot migrate to DistributedDataParallel: syntax error"),
    (b"print('hi')\n", ["notes.txt"], 1, "notes.txt: not a Python file"),
    (b"\x00\x01\x02", ["blob.py"], 1, "blob.py: not a Python source file (binary content)"),
    (b"\xff\xfe not utf-8\n", ["latin.py"], 1, "latin.py: cannot decode"),
    (b"{}", ["nb.ipynb"], 1, "nb.ipynb: a notebook"),
], ids=["missing", "syntax", "not-python", "binary", "undecodable", "notebook"])
def test_cli_bad_inputs(tmp_path, content, args, code, message):
    if content is not None:
        (tmp_path / args[0]).write_bytes(content)
    for apply in ([], ["--apply"]):
        out = cli("migrate", "ddp", *apply, *args, cwd=tmp_path)
        assert out.code == code, out.output
        assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
        if content is not None:
            assert (tmp_path / args[0]).read_bytes() == content


def test_cli_directory_is_a_usage_error(tmp_path):
    out = cli("migrate", "ddp", str(tmp_path))
    assert out.code == 2 and "is a directory" in out.stderr


def test_cli_help_names_the_options():
    out = cli("migrate", "ddp", "--help")
    assert out.code == 0
    for option in ("--apply", "--per-rank-batch", "--nproc"):
        assert option in out.stdout


# ---------------------------------------------------------------- helpers


def _rank0_blocks(module: cst.Module):
    found = []

    class V(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            if module.code_for_node(node.test).strip().endswith(".get_rank() == 0"):
                found.append(node.body)

    module.visit(V())
    return found


def _calls(node):
    out = []

    class V(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            out.append(call)

    node.visit(V())
    return out


def _name(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_name(node.value)}.{node.attr.value}"
    return ""



def test_migrate_does_not_import_torch(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "mnist_argparse.py"
    script.write_text((MIGRATE / "mnist_argparse.py").read_text())
    code = (
        "import sys; from devlint.cli import main\n"
        "try:\n    main(['migrate', 'ddp', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'migrate imported torch'\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
