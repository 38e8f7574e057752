"""DL003 through a wrap helper of the file (``FileFacts.wrap_helpers``): a
function that returns its argument wrapped in DataParallel/DDP, on every path
or under a condition, is a wrap of that argument wherever it is called."""

from __future__ import annotations

import json
import textwrap

import libcst

from devlint.engine import fix_source, lint_source
from devlint.facts.classes import build_facts
from devlint.facts.scripts import collect_script_facts

CODES = ["DL003", "DL004", "DL005", "DL012"]

HEAD = """
import torch
from torch import nn

class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.conv(x)
"""


def findings(body: str, helper: str = ""):
    src = HEAD + textwrap.dedent(helper) + textwrap.dedent(body)
    result = lint_source(src, "script.py", codes=CODES)
    assert not result.internal_errors, result.internal_errors
    return [(d.code, d.message) for d in result.diagnostics]


CONDITIONAL = """
def spread(model):
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    return model
"""

UNCONDITIONAL = """
def spread(m):
    return nn.DataParallel(m)
"""

DETECTOR = """
class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = spread(Backbone())
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.head(self.backbone(x))
"""


def test_inner_wrap_through_a_helper_with_the_outer_wrap_through_it_too():
    for helper in (CONDITIONAL, UNCONDITIONAL):
        found = findings(DETECTOR + "\ndef build():\n    model = Detector().cuda()\n    return spread(model)\n", helper)
        assert [c for c, _ in found] == ["DL003"]
        assert "`self.backbone` is wrapped in DataParallel by `spread` inside `Detector`" in found[0][1]


def test_inner_wrap_through_a_helper_with_a_direct_outer_wrap():
    body = DETECTOR + "\nmodel = nn.DataParallel(Detector())\n"
    assert [c for c, _ in findings(body, CONDITIONAL)] == ["DL003"]


def test_helper_applied_twice():
    body = "\ndef build():\n    model = spread(Backbone())\n    model = spread(model)\n    return model\n"
    for helper in (CONDITIONAL, UNCONDITIONAL):
        [(code, message)] = findings(body, helper)
        assert message.startswith("`model` is already wrapped (by `spread`")


def test_helper_applied_once_and_an_unwrapped_inner_model_stay_silent():
    body = DETECTOR + "\ndef build():\n    return Detector().cuda()\n\nmodel = spread(Backbone())\n"
    assert findings(body, CONDITIONAL) == []


def test_helper_with_the_argument_by_keyword_and_placed():
    helper = """
    from torch.nn.parallel import DistributedDataParallel as DDP

    def ddp(rank, module):
        module = module.to(rank)
        return DDP(module, device_ids=[rank])
    """
    body = "\ndef run(rank):\n    model = ddp(rank, module=Backbone())\n    model = ddp(rank, model.cuda())\n"
    [(code, message)] = findings(body, helper)
    assert "`ddp` wraps it again in DistributedDataParallel" in message


#: a helper that wraps unless the caller turns it off
SWITCHED_HELPER = """
    def wrap(model, parallel=True):
        if parallel:
            model = nn.DataParallel(model)
        return model
    """


def test_a_switch_turned_off_by_the_caller_does_not_wrap():
    helper = SWITCHED_HELPER
    off = DETECTOR.replace("spread(Backbone())", "wrap(Backbone(), parallel=False)")
    assert findings(off + "\nmodel = wrap(Detector())\n", helper) == []
    on = DETECTOR.replace("spread(Backbone())", "wrap(Backbone(), True)")
    assert [c for c, _ in findings(on + "\nmodel = wrap(Detector())\n", helper)] == ["DL003"]


def test_a_helper_that_checks_for_a_wrapper_is_not_a_wrap():
    for guard in ("isinstance(model, nn.DataParallel)", "hasattr(model, 'module')"):
        helper = f"""
        def spread(model):
            if {guard}:
                return model
            return nn.DataParallel(model)
        """
        body = "\ndef build():\n    model = spread(Backbone())\n    return spread(model)\n"
        assert findings(body, helper) == []


def test_a_helper_wrapping_something_else_is_not_a_wrap_of_its_argument():
    helper = """
    def spread(cfg):
        net = Backbone()
        return nn.DataParallel(net)
    """
    body = DETECTOR.replace("spread(Backbone())", "spread(None)") + "\ndef build():\n    m = spread(1)\n    return spread(m)\n"
    assert findings(body, helper) == []


def test_unwrapped_before_the_helper_wraps_again():
    body = "\ndef build():\n    model = spread(Backbone())\n    model = model.module\n    return spread(model)\n"
    assert findings(body, CONDITIONAL) == []


def test_helper_calls_are_not_fixed():
    src = HEAD + CONDITIONAL + "\nmodel = spread(Backbone())\nmodel = spread(model)\n"
    result = fix_source(src, "script.py", codes=CODES, unsafe=True)
    assert [d.code for d in result.diagnostics] == ["DL003"]  # reported, with no fix
    assert result.fixed_text == src


def test_wrap_helper_facts_are_plain():
    src = HEAD + CONDITIONAL + DETECTOR + "\nmodel = spread(Detector())\n"
    module = libcst.parse_module(src)
    facts = collect_script_facts(module, build_facts(module))
    json.dumps(facts.to_dict())
    helper = facts.wrap_helpers["spread"]
    assert (helper.param, helper.param_name, helper.wrapper, helper.conditional) == (0, "model", "torch.nn.DataParallel", True)
    [inner] = facts.scope_named("Detector.__init__").helper_wraps
    assert (inner.helper, inner.statement_target, inner.wrapped_class) == ("spread", "self.backbone", "Backbone")
    assert facts.inner_wrappers == {"Detector": {"backbone": "torch.nn.DataParallel"}}
    [outer] = facts.scopes[0].helper_wraps
    assert (outer.target, outer.wrapped_class, outer.helper_call) == ("model", "Detector", 0)


def test_a_switched_off_helper_call_is_no_earlier_wrap():
    helper = SWITCHED_HELPER
    off = "\ndef build():\n    model = wrap(Backbone(), parallel=False)\n    return nn.DataParallel(model)\n"
    assert findings(off, helper) == []
    on = "\ndef build():\n    model = wrap(Backbone())\n    return nn.DataParallel(model)\n"
    assert [c for c, _ in findings(on, helper)] == ["DL003"]


#: the wrap and the pass-through as the two arms of one conditional expression
EXPRESSION_HELPER = """
def spread(model, multi_gpu=True):
    return nn.DataParallel(model) if multi_gpu else model
"""


def test_a_helper_returning_a_conditional_expression_is_a_conditional_wrap():
    body = "\ndef build():\n    model = spread(Backbone())\n    model = spread(model)\n    return model\n"
    [(code, message)] = findings(body, EXPRESSION_HELPER)
    assert code == "DL003" and message.startswith("`model` is already wrapped (by `spread`")
    module = libcst.parse_module(HEAD + textwrap.dedent(EXPRESSION_HELPER))
    facts = collect_script_facts(module, build_facts(module))
    helper = facts.wrap_helpers["spread"]
    assert helper.conditional and helper.param_name == "model"
    assert helper.condition_params == [(1, "multi_gpu")]


def test_a_conditional_expression_helper_switched_off_does_not_wrap():
    off = DETECTOR.replace("spread(Backbone())", "spread(Backbone(), multi_gpu=False)")
    assert findings(off + "\nmodel = nn.DataParallel(Detector())\n", EXPRESSION_HELPER) == []
    assert [c for c, _ in findings(DETECTOR + "\nmodel = nn.DataParallel(Detector())\n", EXPRESSION_HELPER)] == ["DL003"]


def test_a_conditional_expression_returning_something_else_is_no_helper():
    helper = """
    def pick(model, backup):
        return model if backup is None else backup
    """
    module = libcst.parse_module(HEAD + textwrap.dedent(helper))
    facts = collect_script_facts(module, build_facts(module))
    assert "pick" not in facts.wrap_helpers


def test_a_helper_defined_inside_the_calling_function():
    body = """
    def main(rank):
        from torch.nn.parallel import DistributedDataParallel as DDP

        def wrap(m):
            return DDP(m.to(rank), device_ids=[rank])

        model = wrap(Backbone())
        model = wrap(model)
        return model
    """
    [(code, message)] = findings(body)
    assert code == "DL003" and "`wrap` wraps it again in DistributedDataParallel" in message
    once = body.replace("        model = wrap(model)\n", "")
    assert findings(once) == []


def _rewraps(src: str):
    from devlint.facts.scripts import rewraps_own_attribute, runs_repeatedly

    module = libcst.parse_module(textwrap.dedent(src))
    scripts = collect_script_facts(module, build_facts(module))
    return [
        (s.name, ev.wrapper.rsplit(".", 1)[-1], attr)
        for s in scripts.scopes if runs_repeatedly(scripts, s)
        for ev, attr in rewraps_own_attribute(scripts, s)
    ]


def test_a_method_that_wraps_what_it_stored_on_its_last_call():
    found = _rewraps("""
        import torch
        from torch import nn

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.wrapped = model

            def train(self, amp=False):
                model = self.wrapped
                if amp:
                    model = convert(model)
                if torch.cuda.device_count() > 1:
                    model = nn.DataParallel(model)
                if model is not self.model:
                    self.wrapped = model

            def setup(self):
                self.model = nn.DataParallel(self.model)
    """)
    assert found == [("Trainer.train", "DataParallel", "self.wrapped"), ("Trainer.setup", "DataParallel", "self.model")]


def test_wrapping_kept_apart_guarded_fresh_or_only_from_init_is_no_rewrap():
    assert _rewraps("""
        from torch import nn

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.setup()

            def setup(self):
                self.model = nn.DataParallel(self.model)

            def train(self):
                self.parallel = nn.DataParallel(self.model)

            def guarded(self):
                if not isinstance(self.model, nn.DataParallel):
                    self.model = nn.DataParallel(self.model)

            def fresh(self, build):
                self.model = build()
                self.model = nn.DataParallel(self.model)
    """) == []


def test_a_subclass_of_dataparallel_is_a_wrapper():
    found = findings("""
        class Forwarding(nn.DataParallel):
            def __getattr__(self, name):
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    return getattr(self.module, name)

        def main():
            model = Forwarding(Backbone().cuda())
            model = nn.DataParallel(model)
    """)
    assert [c for c, _ in found] == ["DL003"], found


def _reads(src: str):
    """``name.device`` read -> (scripts, scope, name, order, branch), in order."""
    module = libcst.parse_module(textwrap.dedent(src))
    scripts = collect_script_facts(module, build_facts(module))
    out = []
    for node, _ in sorted(scripts.read_at.items(), key=lambda kv: (kv[1][0], kv[1][1])):
        if node.attr.value == "device":
            scope, order, branch = scripts.position(node)
            out.append((scripts, scope, libcst.Module(body=[]).code_for_node(node.value), order, branch))
    return out


def test_held_class_follows_reaching_bindings_through_moves_and_aliases():
    from devlint.facts.scripts import held_class

    reads = _reads(HEAD + """
class Head(nn.Module):
    pass

def main(flag):
    model = Backbone().to("cuda").eval()
    a = model.device
    net = model.half()
    b = net.device
    if flag:
        model = Head()
    c = model.device
    model = Head()
    d = model.device
    e = flag.device
""")
    got = [held_class(scope, name, order, branch) for _s, scope, name, order, branch in reads]
    # a class on every path, through ``.to(...).eval()`` and an alias; two
    # classes that may reach (``c``) name none; a parameter holds no known class
    assert got == ["Backbone", "Backbone", "", "Head", ""]


def test_held_wrappers_through_aliases_helpers_and_calls_that_pass_through():
    from devlint.facts.scripts import held_wrappers

    reads = _reads(HEAD + CONDITIONAL + """
def unwrap(m):
    return m.module if hasattr(m, "module") else m

def main(flag):
    model = nn.DataParallel(Backbone()).eval()
    a = model.device
    if flag:
        model = model.module
    b = model.device
    model = model.module
    c = model.device
    other = spread(Backbone())
    d = other.device
    same = other
    same = amp.initialize(same)
    e = same.device
    inner = unwrap(same)
    f = inner.device
    bare = accelerator.unwrap_model(same)
    k = bare.device
    g = flag.device

class Trainer:
    def step(self):
        h = self.model.device
        self.model = self.model.module
        i = self.model.device
""")
    got = [held_wrappers(s, scope, name, order, branch) for s, scope, name, order, branch in reads]
    dp = ["torch.nn.DataParallel"]
    assert got == [
        (dp, []),  # a wrap, ``.eval()`` chained
        (dp, []),  # unwrapped on one path only: may still be the wrapper
        ([], []),  # unwrapped on every path
        (dp, []),  # a wrap helper's result
        (dp, []),  # an alias, then a library call given it, which may return it
        ([], []),  # a helper of the file that tests for a wrapper and unwraps it
        ([], []),  # a library's unwrapping call (torch_api.UNWRAPPING_CALLS)
        ([], ["flag"]),  # a parameter: not known to be a wrapper; the caller says what it holds (a trainer hook's model)
        ([], ["self.model"]),  # an attribute: what it held when the method began
        ([], []),
    ]


def test_which_parameters_a_function_returns_unwrapped():
    module = libcst.parse_module(textwrap.dedent(HEAD + """
def attr(m):
    return m.module

def through_getattr(m):
    return getattr(m, "module", m)

def conditional(m):
    return m.module if isinstance(m, nn.DataParallel) else m

def tested_then_rebound(m):
    if hasattr(m, "module"):
        m = m.module
    return m

def looks_inside_returns_it(m, device):
    inner = m.module if isinstance(m, nn.DataParallel) else m
    inner.to(device)
    return m

def second(x, m):
    return m.module.cuda()

def moved(m):
    return m.cuda().eval()
"""))
    scripts = collect_script_facts(module, build_facts(module))
    got = {s.name: s.unwraps_params for s in scripts.scopes[1:] if not s.class_name}
    assert got == {
        "attr": [0], "through_getattr": [0], "conditional": [0], "tested_then_rebound": [0],
        # it tests whether its argument is wrapped, but returns the argument: a wrapper stays one
        "looks_inside_returns_it": [], "second": [1], "moved": [],
    }


def test_the_wrapper_an_attribute_holds_after_init():
    from devlint.facts.scripts import init_wrapper

    module = libcst.parse_module(textwrap.dedent(HEAD + """
class Trainer:
    def __init__(self, model):
        self.model = nn.DataParallel(model)
        self.model.cuda()
        self.kept = model
        self.other = nn.DataParallel(model)
        self.ddp = nn.parallel.DistributedDataParallel(model)

    def step(self):
        self.other = self.other.module
"""))
    scripts = collect_script_facts(module, build_facts(module))
    got = {a: init_wrapper(scripts, "Trainer", a) for a in ("model", "kept", "other", "ddp")}
    assert got == {"model": "torch.nn.DataParallel", "kept": "", "other": "",
                   "ddp": "torch.nn.parallel.DistributedDataParallel"}
# -- whether a name is bound where a call runs (ScriptFacts.unbound_at) ------

def _unbound(src: str, name: str, callee: str = "use"):
    module = libcst.parse_module(textwrap.dedent(src))
    facts = collect_script_facts(module, build_facts(module))
    calls = [n for n in facts.call_points if isinstance(n.func, libcst.Name) and n.func.value == callee]
    return [facts.unbound_at(c, name) for c in calls]


def test_a_deleted_name_is_unbound_until_bound_again():
    src = """
    def f(x):
        device = x.device
        use(device)
        del device
        use()
        device = x.device
        use(device)
    """
    assert _unbound(src, "device") == ["", "deleted", ""]


def test_a_name_bound_later_or_on_one_arm_is_unbound_and_both_arms_bind_it():
    src = """
    def f(x, flag):
        use()
        if flag:
            device = "cuda"
        use()
        if flag:
            dev = "cuda"
        elif x:
            dev = "cpu"
        else:
            dev = "meta"
        use()
        device = "cpu"
    """
    assert _unbound(src, "device") == ["unbound", "unbound", "unbound"]
    assert _unbound(src, "dev") == ["unbound", "unbound", ""]


def test_a_del_later_in_a_loop_reaches_the_top_of_the_loop():
    src = """
    def f(items):
        device = "cuda"
        for item in items:
            use()
            del device
    """
    assert _unbound(src, "device") == ["deleted"]


def test_free_names_are_read_in_the_enclosing_scopes():
    src = """
    import torch
    device = torch.device("cuda")
    gone = 1
    del gone

    def f():
        def inner():
            use()
        local_rank = 0
        use()
        inner()

    class Trainer:
        def fit(self):
            use()
    """
    assert _unbound(src, "device") == ["", "", ""]
    assert _unbound(src, "local_rank") == ["", "", "unbound"]
    assert _unbound(src, "gone") == ["deleted", "deleted", "deleted"]
    assert _unbound(src, "torch") == ["", "", ""]
    assert _unbound(src, "missing") == ["unbound", "unbound", "unbound"]


def test_module_level_names_count_from_where_they_are_bound():
    src = """
    use()
    from config import device
    use()
    """
    assert _unbound(src, "device") == ["unbound", ""]
