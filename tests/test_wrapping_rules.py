"""DL003/DL004/DL005/DL012 on the shapes training scripts take: imports under
any alias, wrappers at module level, in functions, in trainer classes, on
branches; and the script facts they read."""

from __future__ import annotations

import json
import textwrap

import libcst
import pytest

from devlint.engine import fix_source, lint_source
from devlint.facts.classes import build_facts
from devlint.facts.scripts import collect_script_facts

CODES = ["DL003", "DL004", "DL005", "DL012"]


def findings(src: str):
    src = textwrap.dedent(src).lstrip("\n")
    result = lint_source(src, "script.py", codes=CODES)
    assert not result.internal_errors, result.internal_errors
    return [(d.line, d.code) for d in result.diagnostics]


def fixed(src: str, unsafe: bool = True) -> str:
    src = textwrap.dedent(src).lstrip("\n")
    result = fix_source(src, "script.py", codes=CODES, unsafe=unsafe)
    assert not result.internal_errors, result.internal_errors
    libcst.parse_module(result.fixed_text)
    again = fix_source(result.fixed_text, "script.py", codes=CODES, unsafe=unsafe)
    assert again.fixed_text == result.fixed_text
    return result.fixed_text


def test_aliases_are_resolved():
    src = """
    import argparse
    import torch as T
    import torch.nn.parallel as par
    from torch.nn import DataParallel as DP

    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    args = parser.parse_args()

    net = T.nn.Linear(3, 3)
    net = DP(net)
    net = T.nn.parallel.DataParallel(net)

    model = T.nn.Linear(3, 3).cuda()
    model = par.DistributedDataParallel(model, device_ids=[0])

    class Split(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = T.nn.Linear(3, 3).to(T.device("cuda", 1))
            self.b = T.nn.Linear(3, 3)

    m2 = DP(Split())
    m3 = DP(DP(T.nn.Linear(2, 2)))
    m4 = par.DistributedDataParallel(T.nn.Linear(2, 2)).to(args.local_rank)
    """
    assert findings(src) == [(12, "DL003"), (15, "DL012"), (23, "DL004"), (24, "DL003"), (25, "DL005")]


def test_names_that_only_look_like_wrappers_are_ignored():
    src = """
    import torch
    from mylib import DataParallel, DistributedDataParallel

    model = DataParallel(DataParallel(torch.nn.Linear(2, 2))).to("cuda:1")
    ddp = DistributedDataParallel(model, device_ids=[0])
    local_rank = 3
    """
    assert findings(src) == []


@pytest.mark.parametrize(
    "body",
    [
        # one wrapper at the top level after .to(device)
        """
        model = Net().to(device)
        model = nn.DataParallel(model)
        """,
        # a wrapper inside `if torch.cuda.device_count() > 1:` around an unwrapped model
        """
        model = Net().to(device)
        if torch.cuda.device_count() > 1:
            model = nn.DataParallel(model)
        model.to(device)
        """,
        # unwrapping with model.module before saving / re-wrapping
        """
        model = nn.DataParallel(Net()).cuda()
        torch.save(model.module.state_dict(), "m.pt")
        model = model.module
        model = nn.DataParallel(model)
        """,
        # DataParallel and DDP on exclusive paths
        """
        if args.local_rank == -1:
            model = nn.DataParallel(model)
        else:
            model = nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank])
        """,
        # a new model in every fold
        """
        for fold in range(5):
            model = Net()
            model = nn.DataParallel(model)
        """,
    ],
)
def test_correct_scripts_stay_silent(body):
    src = (
        "import torch\nfrom torch import nn\n\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n\n"
        "def main(args, model, device):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"
    )
    assert findings(src) == []


def test_wrappers_in_different_functions_on_different_models():
    src = """
    from torch import nn

    def make_g():
        g = nn.Linear(2, 2)
        return nn.DataParallel(g)

    def make_d():
        g = nn.Linear(2, 2)
        g = nn.DataParallel(g)
        return g
    """
    assert findings(src) == []


def test_double_wrap_after_an_unconditional_wrap_on_a_branch():
    src = """
    from torch import nn

    def main(model, n):
        model = nn.DataParallel(model)
        if n > 1:
            model = nn.DataParallel(model)
        return model
    """
    assert findings(src) == [(6, "DL003")]
    assert fixed(src).endswith("    model = nn.DataParallel(model)\n    return model\n")


def test_inner_wrapper_in_a_helper_method():
    src = """
    from torch import nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = self._parallel(nn.Linear(4, 4))

        def _parallel(self, m):
            return nn.DataParallel(m)

    if __name__ == "__main__":
        model = nn.DataParallel(Model())
    """
    assert findings(src) == [(9, "DL003")]
    assert "return m\n" in fixed(src)


def test_inner_and_outer_wrappers_both_conditional_stay_silent():
    # an "inside" mode and an "outside" mode: nothing shows they meet
    src = """
    from torch import nn

    class Model(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            if inner:
                self.fc = nn.DataParallel(self.fc)

    def build(outer):
        model = Model(not outer)
        if outer:
            model = nn.DataParallel(model)
        return model
    """
    assert findings(src) == []


def test_ddp_moved_after_wrap_in_a_trainer_keeps_the_non_ddp_path():
    src = """
    import torch
    from torch import nn

    class Trainer:
        def __init__(self, model, world_size, local_rank):
            self.device = torch.device("cuda", local_rank)
            self.model = model
            if world_size > 1:
                self.model = nn.parallel.DistributedDataParallel(self.model, device_ids=[local_rank])
            self.model.to(self.device)
    """
    assert findings(src) == [(10, "DL005")]
    out = fixed(src, unsafe=False)
    assert "DistributedDataParallel(self.model.to(self.device), device_ids=[local_rank])" in out
    assert out.rstrip().endswith("self.model.to(self.device)")


def test_ddp_move_fix_is_not_offered_when_the_device_changes_in_between():
    src = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    def main(model, rank):
        model = DDP(model)
        device = torch.device("cuda", rank)
        model.to(device)
    """
    result = lint_source(textwrap.dedent(src).lstrip("\n"), "s.py", codes=["DL005"])
    [d] = result.diagnostics
    assert d.fix is None and "device" in d.no_fix_reason


def test_dataparallel_cuda_after_set_device_is_not_judged():
    src = """
    import torch
    from torch import nn

    torch.cuda.set_device(1)
    model = nn.DataParallel(nn.Linear(2, 2), device_ids=[1, 2]).cuda()
    """
    assert findings(src) == []


def test_dataparallel_to_a_module_level_device():
    src = """
    import torch
    from torch import nn

    device = torch.device("cuda:1")
    model = nn.DataParallel(nn.Linear(2, 2))
    model.to(device)
    """
    assert findings(src) == [(6, "DL005")]


def test_dl012_rank_from_the_environment_and_from_argparse():
    src = """
    import os
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    LOCAL_RANK = int(os.environ.get("LOCAL_RANK", 0))

    def wrap(model):
        return DDP(model, device_ids=[0], output_device=0)
    """
    assert findings(src) == [(8, "DL012")]
    assert "device_ids=[LOCAL_RANK], output_device=LOCAL_RANK" in fixed(src)


def test_dl012_global_rank_is_used_only_when_nothing_better_exists():
    src = """
    import torch.distributed as dist
    from torch import nn

    def main(model):
        rank = dist.get_rank()
        return nn.parallel.DistributedDataParallel(model.cuda(rank), device_ids=[0])
    """
    assert findings(src) == [(6, "DL012")]
    assert "device_ids=[rank]" in fixed(src)


def test_removing_a_guarded_wrapper_removes_the_guard():
    src = """
    import torch
    from torch import nn

    class TwoGPU(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2).cuda(0)
            self.b = nn.Linear(2, 2).cuda(1)

    def main():
        model = TwoGPU()
        if torch.cuda.device_count() > 1:
            model = nn.DataParallel(model)
        return model
    """
    assert findings(src) == [(13, "DL004")]
    out = fixed(src)
    assert "device_count" not in out and "DataParallel" not in out
    assert "    model = TwoGPU()\n    return model\n" in out


def test_script_facts_are_plain_and_serialisable():
    src = textwrap.dedent(
        """
        import os
        import torch
        from torch import nn

        def main():
            local_rank = int(os.environ["LOCAL_RANK"])
            model = nn.Linear(2, 2).to(local_rank)
            if torch.cuda.device_count() > 1:
                model = nn.DataParallel(model, device_ids=[0, 1])
            model.cuda()
        """
    )
    module = libcst.parse_module(src)
    facts = collect_script_facts(module, build_facts(module))
    json.dumps(facts.to_dict())  # plain records
    main = facts.scope_named("main")
    assert main.rank_names == ["local_rank"]
    [wrap] = main.wraps
    assert (wrap.wrapper, wrap.target, wrap.wrapped_name, wrap.device_ids) == ("torch.nn.DataParallel", "model", "model", "[0, 1]")
    assert wrap.branch and wrap.branch[0].endswith(":0")
    kinds = [(b.target, b.kind) for b in main.binds]
    assert kinds == [("local_rank", "call"), ("model", "construct"), ("model", "wrap")]
    places = [(p.target, p.method, p.device) for p in main.placements]
    assert places == [("", "to", "local_rank"), ("model", "cuda", "")]


def test_dataparallel_to_a_local_device_variable():
    src = """
    import torch
    from torch import nn

    def main(args):
        device = torch.device("cuda:1")
        model = nn.DataParallel(nn.Linear(2, 2))
        model.to(device)
        other = nn.DataParallel(nn.Linear(2, 2))
        device = torch.device(args.device)
        other.to(device)
    """
    assert findings(src) == [(7, "DL005")]


@pytest.mark.parametrize(
    "device_map, split",
    [
        ('"auto"', True),
        ('"balanced"', True),
        ('{"transformer": 0, "lm_head": 1}', True),
        ("args.device_map", True),
        ('{"": local_rank}', False),
        ('{"": PartialState().process_index}', False),
        ('{"transformer": 0, "lm_head": 0}', False),
        ('"cuda:0"', False),
        ('f"cuda:{local_rank}"', False),
        ("local_rank", False),
        ("torch.device('cuda', local_rank)", False),
        ("0", False),
    ],
)
def test_dl004_device_map_that_splits_the_model(device_map, split):
    src = f"""
    import os
    import torch
    from accelerate import PartialState
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import AutoModelForCausalLM

    def main(args):
        local_rank = int(os.environ["LOCAL_RANK"])
        model = AutoModelForCausalLM.from_pretrained("gpt2", device_map={device_map})
        return DDP(model, device_ids=[local_rank])
    """
    assert findings(src) == ([(10, "DL004")] if split else [])


@pytest.mark.parametrize("call, reported", [
    ("self.accelerator.unwrap_model(self.model)", False),  # a library's unwrapping call: no wrapper comes back
    ("self.accelerator.prepare(self.model)", True),  # a library call given the model may return it as it is
])
def test_a_library_unwrapping_call_passes_no_wrapper_on(call, reported):
    src = textwrap.dedent(f"""
    from torch import nn


    class Trainer:
        def __init__(self, model, accelerator):
            self.model = model.cuda()
            self.accelerator = accelerator

        def stage(self):
            self.model = {call}
            self.model = nn.DataParallel(self.model)

        def fit(self, stages):
            for _ in range(stages):
                self.stage()
    """)
    found = [d.code for d in lint_source(src, "train.py", codes=["DL003"]).diagnostics]
    assert found == (["DL003"] if reported else [])
# -- DataParallel with device_ids known only at run time ---------------------

RUNTIME_IDS = """
import torch
import torch.nn as nn

def build(gpus, args):
    a = nn.DataParallel(nn.Linear(4, 4), device_ids=gpus).cuda()
    b = nn.DataParallel(nn.Linear(4, 4), device_ids=[args.gpu, 1]).to("cuda:1")
    c = nn.DataParallel(nn.Linear(4, 4), device_ids=list(range(args.first, 4))).cuda()
    d = nn.DataParallel(nn.Linear(4, 4), device_ids=gpus)
    gpus = gpus[1:]
    d.cuda()
    e = nn.DataParallel(nn.Linear(4, 4).cuda(gpus[0]), device_ids=gpus)
    f = nn.DataParallel(nn.Linear(4, 4), device_ids=gpus).to(args.device)
    return a, b, c, d, e, f
"""


def test_dataparallel_ids_known_at_run_time_placed_on_a_named_gpu():
    result = lint_source(RUNTIME_IDS, "script.py", codes=["DL005"])
    got = [(d.line, d.fix.safety.value if d.fix else None, d.no_fix_reason) for d in result.diagnostics]
    assert [line for line, _, _ in got] == [6, 7, 8, 11]
    assert got[0][1] == got[1][1] == "unsafe"
    assert "computed in the call" in got[2][2] and "`gpus` changes" in got[3][2]
    out = fixed(RUNTIME_IDS)
    assert "a = nn.DataParallel(nn.Linear(4, 4).cuda(gpus[0]), device_ids=gpus)\n" in out
    assert 'b = nn.DataParallel(nn.Linear(4, 4).to(args.gpu), device_ids=[args.gpu, 1])\n' in out
    assert fixed(RUNTIME_IDS, unsafe=False) == RUNTIME_IDS.lstrip("\n")


def test_physical_gpu_ids_from_visible_devices():
    """What a name holds of CUDA_VISIBLE_DEVICES: the string or its split
    list, or one element of it (a physical GPU id, not a device index);
    its length is neither."""
    src = textwrap.dedent(
        """
        import os

        VISIBLE = os.getenv("CUDA_VISIBLE_DEVICES", "").split(",")

        def main(local_rank):
            raw = os.environ["CUDA_VISIBLE_DEVICES"]
            ids = raw.strip().split(",")
            gpu = int(ids[local_rank])
            first = VISIBLE[0]
            some = ids[1:]
            n = len(ids)
            label = "gpu" + ids[0]
        """
    )
    module = libcst.parse_module(src)
    facts = collect_script_facts(module, build_facts(module))
    main = facts.scope_named("main")
    assert main.visible_lists == ["raw", "ids", "some"]
    assert main.physical_ids == ["gpu"]
    assert facts.scopes[0].visible_lists == ["VISIBLE"]
    assert facts.scopes[0].physical_ids == []


def test_rewraps_in_loop_and_relayed_wrap_helpers():
    """A loop round that wraps what the last round stored, directly or
    through a function that returns a wrap helper's result on its argument;
    not a wrap under a condition of the round, nor one of a fresh model."""
    from devlint.facts.scripts import rewraps_in_loop

    src = textwrap.dedent(
        """
        import torch.nn as nn

        def setup(model):
            return nn.DataParallel(model).cuda()

        def stage(model, data):
            model = setup(model)
            return model

        def loop_direct(model, rounds):
            for r in rounds:
                model = nn.DataParallel(model)

        def loop_relayed(model, rounds):
            for r in rounds:
                model = stage(model, r)

        def loop_first_round(model, rounds):
            for i in rounds:
                if i == 0:
                    model = nn.DataParallel(model)

        def loop_fresh(build, rounds):
            for r in rounds:
                model = build(r)
                model = setup(model)
        """
    )
    module = libcst.parse_module(src)
    facts = collect_script_facts(module, build_facts(module))
    assert set(facts.wrap_helpers) == {"setup", "stage"}
    assert facts.wrap_helpers["stage"].param == 0 and facts.wrap_helpers["stage"].wrapper == "torch.nn.DataParallel"
    found = {name: [ev.helper or ev.wrapper for ev in rewraps_in_loop(facts.scope_named(name))]
             for name in ("loop_direct", "loop_relayed", "loop_first_round", "loop_fresh")}
    assert found == {"loop_direct": ["torch.nn.DataParallel"], "loop_relayed": ["stage"], "loop_first_round": [], "loop_fresh": []}
