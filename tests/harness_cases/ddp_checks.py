"""The ddp placement's checks (tests/test_harness_ddp.py): each case that
must fail as it would on a multi-GPU machine, beside a look-alike that must
run. Every rank calls the case's function, as torchrun starts a script."""

import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def _rank():
    return int(os.environ["LOCAL_RANK"])


def _net():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def placed_then_wrapped():
    dist.init_process_group("nccl")
    torch.cuda.set_device(_rank())
    model = DDP(_net().cuda(), device_ids=[_rank()])
    return model(torch.randn(4, 8, device="cuda"))


def wrapped_on_the_cpu():
    dist.init_process_group("nccl")
    return DDP(_net(), device_ids=[_rank()])


def cpu_module_nccl():
    dist.init_process_group("nccl")
    return DDP(_net())


def cpu_module_gloo():
    dist.init_process_group("gloo")
    return DDP(_net())(torch.randn(4, 8))


def device_ids_zero():
    dist.init_process_group("nccl")
    torch.cuda.set_device(_rank())
    model = DDP(_net().cuda(), device_ids=[0])
    return model(torch.randn(4, 8, device="cuda"))


def every_rank_on_gpu_0():
    dist.init_process_group("nccl")
    return DDP(_net().cuda(), device_ids=[_rank()])  # no set_device: the current GPU is 0


def moved_after_wrap_gloo():
    dist.init_process_group("gloo")
    model = DDP(_net())
    model.cuda(_rank())
    model(torch.randn(4, 8, device=_rank())).sum().backward()
    return model


def moved_before_wrap_gloo():
    dist.init_process_group("gloo")
    model = DDP(_net().cuda(_rank()))
    model(torch.randn(4, 8, device=_rank())).sum().backward()
    return model


def ranks_disagree():
    dist.init_process_group("nccl")
    return DDP(nn.Linear(8, 16 + _rank()).to(_rank()), device_ids=[_rank()])


def frozen():
    dist.init_process_group("nccl")
    model = _net().to(_rank()).requires_grad_(False)
    return DDP(model, device_ids=[_rank()])


def two_device_ids():
    dist.init_process_group("nccl")
    return DDP(_net().to(_rank()), device_ids=[_rank(), _rank()])


def half_on_the_cpu():
    dist.init_process_group("nccl")
    model = _net()
    model[0].to(_rank())
    return DDP(model)


def no_group():
    return DDP(_net().to(_rank()), device_ids=[_rank()])


def wrapped_twice():
    dist.init_process_group("nccl")
    model = DDP(DDP(_net().to(_rank()), device_ids=[_rank()]), device_ids=[_rank()])
    return model(torch.randn(4, 8, device=_rank()))


def _load(**kwargs):
    return lambda: torch.load("weights.pt", **kwargs)


def save_then_load():
    weights = torch.randn(3).to(_rank())
    torch.save({"w": weights}, f"mine{_rank()}.pt")
    return torch.load(f"mine{_rank()}.pt")["w"]


def all_reduce_fake():
    dist.init_process_group("nccl")
    loss = torch.ones(2, device=_rank())
    dist.all_reduce(loss)
    return loss


def all_reduce_cpu_nccl():
    dist.init_process_group("nccl")
    total = torch.ones(2)
    dist.all_reduce(total)
    return total


def hangs_on_rank_1():
    with open(os.path.join(os.environ["DEVLINT_TEST_PIDS"], f"rank{_rank()}"), "w") as fh:
        fh.write(str(os.getpid()))
    dist.init_process_group("gloo")
    if _rank() == 1:
        time.sleep(600)
    dist.barrier()
    return torch.ones(1).to(_rank())


def aborts_on_rank_1():
    if _rank() == 1:
        os.abort()
    return torch.ones(1).to(_rank())


def _case(name, run, **extra):
    return dict(name=name, placement="ddp", run=run, **extra)


def devlint_cases():
    return [
        _case("placed_then_wrapped", placed_then_wrapped),
        _case("wrapped_on_the_cpu", wrapped_on_the_cpu),
        _case("cpu_module_nccl", cpu_module_nccl),
        _case("cpu_module_gloo", cpu_module_gloo, output_device="cpu"),
        _case("device_ids_zero", device_ids_zero),
        _case("every_rank_on_gpu_0", every_rank_on_gpu_0),
        _case("moved_after_wrap_gloo", moved_after_wrap_gloo),
        _case("moved_before_wrap_gloo", moved_before_wrap_gloo),
        _case("ranks_disagree", ranks_disagree),
        _case("frozen", frozen),
        _case("two_device_ids", two_device_ids),
        _case("half_on_the_cpu", half_on_the_cpu),
        _case("no_group", no_group),
        _case("wrapped_twice", wrapped_twice),
        _case("load_as_saved", _load(), checkpoints={"weights.pt": lambda: torch.ones(3)}, output_device=None),
        _case("load_to_the_rank", lambda: torch.load("weights.pt", map_location=f"cuda:{_rank()}"),
              checkpoints={"weights.pt": lambda: torch.ones(3)}),
        _case("load_to_cpu", _load(map_location="cpu"), checkpoints={"weights.pt": lambda: torch.ones(3)}, output_device="cpu"),
        _case("save_then_load", save_then_load),
        _case("all_reduce_fake", all_reduce_fake),
        _case("all_reduce_cpu_nccl", all_reduce_cpu_nccl, output_device="cpu"),
        _case("hangs_on_rank_1", hangs_on_rank_1),
        _case("aborts_on_rank_1", aborts_on_rank_1),
        _case("three_ranks", placed_then_wrapped, world_size=3),
        _case("argv", lambda: torch.tensor([len(a) for a in __import__("sys").argv[1:]]).to(_rank()), argv=["--lr", "0.1"]),
    ]
