"""The Training provider: which ``torch.load`` calls read a file the same
scope wrote before (an in-process round trip) or one shipped inside the
package, and whether the file runs distributed."""

import textwrap

import libcst as cst

from devlint.facts.classes import Classes
from devlint.facts.store import FactStore
from devlint.facts.training import Training, TrainingFacts, path_refs


def _training(src: str) -> TrainingFacts:
    return FactStore(cst.parse_module(textwrap.dedent(src)), [Classes, Training])[Training]


def _loads(facts: TrainingFacts, scope: str, kind: str):
    """The first argument's code of each load of ``kind`` in ``scope``."""
    calls = getattr(facts.scopes[scope], kind)
    return sorted(cst.Module([]).code_for_node(c.args[0].value) for c in calls)


def test_a_file_written_before_it_is_read_is_a_round_trip():
    facts = _training(
        """
        import os
        import torch

        def test_save(trainer, model, tmp):
            out = str(tmp)
            trainer.save(path=out, model_filename="m.pt")
            a = torch.load(os.path.join(out, "m.pt"))
            trainer.save_checkpoint("runs/exp1/")
            b = torch.load("runs/exp1/last.pt")
            c = torch.load("runs/exp2/last.pt")

        def resume(model, path):
            model.load_state_dict(torch.load(path))
            torch.save(model.state_dict(), path)
        """
    )
    assert _loads(facts, "test_save", "round_trips") == ['"runs/exp1/last.pt"', 'os.path.join(out, "m.pt")']
    # read before it is written: a previous run's file
    assert _loads(facts, "resume", "round_trips") == []
    assert not facts.distributed


def test_files_inside_the_package():
    facts = _training(
        """
        import os
        from importlib.resources import files
        from pathlib import Path
        import torch

        WEIGHTS = Path(__file__).parent / "w.pt"

        def load_all(user_path):
            here = os.path.dirname(__file__)
            p = os.path.join(here, "data", "net.pt")
            a = torch.load(p)
            b = torch.load(str(WEIGHTS))
            c = torch.load(files("mypkg") / "head.pt")
            d = torch.load(user_path)
            p = user_path
            e = torch.load(p)
        """
    )
    assert _loads(facts, "load_all", "package_files") == ['files("mypkg") / "head.pt"', "p", "str(WEIGHTS)"]
    # the rebound `p` (a user's path) is not the package's: only one `p` load counts
    assert len(facts.scopes["load_all"].package_files) == 3


def test_a_distributed_file():
    facts = _training(
        """
        import torch
        import torch.distributed as dist

        def main(model, path):
            dist.init_process_group("nccl")
            torch.save(model.state_dict(), path)
            model.load_state_dict(torch.load(path))
        """
    )
    assert facts.distributed
    assert len(facts.scopes["main"].round_trips) == 1  # recorded; DL010 does not excuse it under DDP


def test_path_refs_name_the_file_not_the_functions():
    expr = cst.parse_expression('os.path.join(args.out_dir, f"{epoch}.pt", "best.pt", "a b")')
    assert path_refs(expr, {"os"}) == {"args.out_dir", "epoch", "'best.pt"}
    assert "os.path" in path_refs(expr)  # a name, unless it is known to be a module


def test_a_temporary_file_is_the_process_own():
    facts = _training(
        """
        import tempfile
        import torch
        import torch.distributed as dist

        def check(model_ddp, shared_path):
            with tempfile.NamedTemporaryFile() as tmp:
                torch.save(model_ddp, tmp.name)
                a = torch.load(tmp.name)
            d = tempfile.mkdtemp()
            torch.save(model_ddp, d + "/m.pt")
            b = torch.load(d + "/m.pt")
            torch.save(model_ddp.state_dict(), shared_path)
            c = torch.load(shared_path)
        """
    )
    scope = facts.scopes["check"]
    assert facts.distributed and len(scope.round_trips) == 3
    assert _loads(facts, "check", "private_round_trips") == ['d + "/m.pt"', "tmp.name"]


def test_a_loaded_object_fed_to_load_state_dict_among_other_uses():
    facts = _training(
        """
        import torch

        def export(model, path, opt):
            state = torch.load(path)
            model.load_state_dict(state["model"])
            return state

        def resume(model, path):
            ckpt = torch.load(path)
            model.load_state_dict(ckpt)

        def assign(model, path):
            sd = torch.load(path)
            model.load_state_dict(sd, assign=True)
            other = torch.load(path)
            print(other)
        """
    )
    export, resume, assign = (facts.scopes[n] for n in ("export", "resume", "assign"))
    assert export.fed_to_state_dict == {"state"} and export.loaded == {"state": False}
    assert resume.fed_to_state_dict == {"ckpt"} and resume.loaded == {"ckpt": True}
    assert assign.fed_to_state_dict == set()


def test_load_state_dict_from_url_loads_with_torch_load():
    # torch.hub.load_state_dict_from_url(url, model_dir=None, map_location=None, ...)
    # passes map_location on to torch.load; model_zoo.load_url is the same function
    from devlint.facts.training import is_torch_load, map_location_arg

    module = cst.parse_module(textwrap.dedent(
        """
        import torch
        import torch.utils.model_zoo as zoo
        from torch.hub import load_state_dict_from_url as fetch

        a = fetch(url)
        b = zoo.load_url(url, cache)
        c = zoo.load_url(url, cache, "cpu")
        d = torch.hub.load_state_dict_from_url(url, map_location=dev)
        e = torch.load(path, "cpu")
        f = torch.hub.load(repo, "entry")
        """
    ))
    store = FactStore(module, [Classes, Training])
    facts = store[Classes]
    calls = {s.body[0].targets[0].target.value: s.body[0].value for s in module.body[3:]}
    code = cst.Module([]).code_for_node
    assert [n for n, c in calls.items() if is_torch_load(facts, c.func)] == ["a", "b", "c", "d", "e"]
    located = {n: map_location_arg(facts, c) for n, c in calls.items() if n != "f"}
    assert located["a"] is None and located["b"] is None  # the second argument of load_url is model_dir
    assert code(located["c"]) == '"cpu"' and code(located["d"]) == "dev" and code(located["e"]) == '"cpu"'
    # what the file loaded from a URL feeds load_state_dict like a torch.load
    training = _training(
        """
        import torch

        def restore(model, url):
            state = torch.hub.load_state_dict_from_url(url)
            model.load_state_dict(state)
        """
    )
    assert training.scopes["restore"].loaded == {"state": True}


def test_dl010_is_silent_in_test_code_unless_it_runs_distributed():
    from devlint.engine import lint_source
    from devlint.files import is_test_file

    src = textwrap.dedent(
        """
        import torch

        def test_resume(trainer, tmp_path):
            trainer.fit()  # the checkpoint callback writes best.pt
            state = torch.load(tmp_path / "best.pt")
            trainer.model.load_state_dict(state)
        """
    )
    assert [d.code for d in lint_source(src, "src/pkg/resume.py", codes=["DL010"]).diagnostics] == ["DL010"]
    for path in ("tests/test_resume.py", "pkg/resume_test.py", "tests/conftest.py"):
        assert is_test_file(path)
        assert lint_source(src, path, codes=["DL010"]).diagnostics == []
    for path in ("tests/helpers.py", "src/testing.py", "pkg/contest.py", "test_data.json"):
        assert not is_test_file(path)
    distributed = src.replace("import torch\n", "import torch\nimport torch.distributed as dist\n") + "    dist.barrier()\n"
    # every rank of a distributed test loads rank 0's file onto rank 0's GPU
    assert [d.code for d in lint_source(distributed, "tests/test_resume.py", codes=["DL010"]).diagnostics] == ["DL010"]
