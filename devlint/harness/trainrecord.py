"""Run a training script as ``python SCRIPT ARGS...`` runs it, and record what
comparing two versions of it needs (``devlint.harness.migration``).

Started as ``python trainrecord.py SCRIPT ARGS...`` (by the torchrun-style
launcher for the ranks of a DDP script, or as one process for a DataParallel
one). It records, without changing what the script computes:

* ``losses``: the value of every one-element tensor ``backward()`` is called
  on (the loss of each step, scaled when a GradScaler scales it);
* ``params``: the parameters of the first optimiser the script built, after
  the script ended;
* ``orders``: for every pass over a ``DistributedSampler``, the indices it
  gave this rank, with the epoch it was set to and whether it shuffles.

With ``DEVLINT_REPLAY_ORDERS`` (a JSON list of index lists), each pass over a
``RandomSampler`` (a ``DataLoader`` with ``shuffle=True``) yields the next
list instead of drawing its own permutation: the original script sees its
data in the order the migrated one's sampler chose, so that the two can be
compared step by step. Nothing else is patched.

The record goes to ``$DEVLINT_RECORD_DIR/rank<RANK>.json`` (rank 0 without
``RANK``), also when the script fails (then with ``error``).
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback


def main(argv) -> int:
    if not argv:
        print("usage: trainrecord.py SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    script, args = argv[0], argv[1:]
    out = os.path.join(os.environ["DEVLINT_RECORD_DIR"], f"rank{os.environ.get('RANK', '0')}.json")
    record = {"script": script, "losses": [], "params": None, "orders": [], "replayed": 0, "error": None}
    import torch
    from torch.utils.data import RandomSampler
    from torch.utils.data.distributed import DistributedSampler

    optimizers = []
    backward = torch.Tensor.backward
    optimizer_init = torch.optim.Optimizer.__init__
    sampler_iter = DistributedSampler.__iter__

    def recorded_backward(self, *a, **k):
        if self.numel() == 1:
            record["losses"].append(float(self.detach().float()))
        return backward(self, *a, **k)

    def recorded_init(self, *a, **k):
        optimizer_init(self, *a, **k)
        optimizers.append(self)

    def recorded_iter(self):
        indices = list(sampler_iter(self))
        record["orders"].append({"epoch": self.epoch, "shuffle": self.shuffle, "size": len(self.dataset),
                                 "indices": indices})
        return iter(indices)

    torch.Tensor.backward = recorded_backward
    torch.optim.Optimizer.__init__ = recorded_init
    DistributedSampler.__iter__ = recorded_iter
    replay = os.environ.get("DEVLINT_REPLAY_ORDERS")
    if replay:
        with open(replay) as fh:
            orders = json.load(fh)

        def replayed_iter(self):
            if record["replayed"] >= len(orders):
                raise RuntimeError(f"a pass over a shuffled DataLoader the migrated script did not make "
                                   f"(pass {record['replayed'] + 1}; it made {len(orders)})")
            order = orders[record["replayed"]]
            if sorted(order) != list(range(len(self.data_source))):
                raise RuntimeError(f"the migrated script's order for pass {record['replayed'] + 1} is not a "
                                   f"permutation of this dataset's {len(self.data_source)} indices")
            record["replayed"] += 1
            return iter(order)

        RandomSampler.__iter__ = replayed_iter

    code = 0
    sys.argv = [script, *args]
    # what `python SCRIPT` puts first on the path (not this file's folder,
    # whose modules would shadow the script's own)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code:
            record["error"] = f"SystemExit: {exc.code}"
    except BaseException as exc:
        record["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        traceback.print_exc()
        code = 1
    finally:
        if optimizers:
            record["params"] = [p.detach().float().cpu().reshape(-1).tolist()
                                for group in optimizers[0].param_groups for p in group["params"]]
        with open(out, "w") as fh:
            json.dump(record, fh)
    return code


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # no destructors: on torch 2.13 a rank whose script destroyed its gloo
    # group may still abort in a C++ destructor at exit ("terminate called
    # without an active exception", about one run in three on two cores);
    # the record is written by now (as ddp.py's ranks do)
    os._exit(code)
