"""The fact store: providers built lazily, once, and only when declared."""

import textwrap

import libcst as cst
import pytest

from devlint.engine import analyse, lint_source
from devlint.facts.classes import Classes, FileFacts
from devlint.facts.flow import DeviceFlow, Flow
from devlint.facts.scripts import ScriptFacts, Scripts
from devlint.facts.store import FactStore, Provider, UndeclaredFact, closure
from devlint.facts.training import Training, TrainingFacts
from devlint.rule import Rule, all_rules

SRC = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x) + torch.zeros(2)

    model = nn.DataParallel(Net().cuda())
    """
)


def _module():
    return cst.parse_module(SRC)


def test_each_provider_gives_its_record_and_is_built_once():
    store = FactStore(_module(), [Classes, Scripts, Training, Flow])
    assert isinstance(store[Classes], FileFacts)
    assert isinstance(store[Scripts], ScriptFacts)
    assert isinstance(store[Training], TrainingFacts)
    assert isinstance(store[Flow], DeviceFlow)
    assert store[Scripts] is store[Scripts]
    # the providers share the one record of what they require
    assert store[Scripts].facts is store[Classes] and store[Flow].facts is store[Classes]


def test_nothing_is_built_before_it_is_read():
    store = FactStore(_module(), [Classes, Scripts, Flow])
    assert not any(store.built(p) for p in (Classes, Scripts, Flow))
    store[Flow]
    assert store.built(Flow) and store.built(Classes) and not store.built(Scripts)


def test_reading_an_undeclared_provider_fails():
    store = FactStore(_module(), [Classes])
    store[Classes]
    with pytest.raises(UndeclaredFact, match="Scripts was read, but no enabled rule declares it"):
        store[Scripts]


def test_a_declaration_brings_what_it_requires():
    assert closure([Flow]) == {Flow, Classes, Training}
    store = FactStore(_module(), [Training])
    assert isinstance(store[Classes], FileFacts)
    # the flow reads the script facts only when script code needs them
    flow_store = FactStore(_module(), [Flow])
    flow_store[Flow]
    assert not flow_store.built(Training)


def test_a_provider_reading_what_it_did_not_require_fails():
    class Sneaky(Provider):
        requires = (Classes,)

        @classmethod
        def build(cls, store):
            return store[Scripts]

    store = FactStore(_module(), [Sneaky, Scripts])
    with pytest.raises(UndeclaredFact, match="provider Sneaky reads Scripts without declaring it"):
        store[Sneaky]


def test_providers_that_require_each_other_fail_with_the_chain():
    class A(Provider):
        @classmethod
        def build(cls, store):
            return store[B]

    class B(Provider):
        requires = (A,)

        @classmethod
        def build(cls, store):
            return store[A]

    A.requires = (B,)
    store = FactStore(_module(), [A])
    with pytest.raises(UndeclaredFact, match="providers require each other: A -> B -> A"):
        store[A]


def test_the_engine_builds_only_what_the_enabled_rules_declare():
    rules = all_rules()
    module = _module()
    analysis = analyse(module, "m.py", [rules["DL001"]])
    assert analysis.store.built(Flow) and not analysis.store.built(Scripts) and not analysis.store.built(Training)
    analysis = analyse(module, "m.py", [rules["DL003"]])
    assert analysis.store.built(Scripts) and not analysis.store.built(Flow) and not analysis.store.built(Training)


def test_a_rule_reading_an_undeclared_provider_is_an_internal_error_not_a_silent_empty_fact():
    class Careless(Rule):
        code = "DL999"
        name = "careless"
        message = "m"

        def visit_Module(self, node):
            self.scripts  # noqa: B018 -- not in ``requires``

    analysis = analyse(_module(), "m.py", [Careless])
    [error] = analysis.errors
    assert "internal error in DL999 (UndeclaredFact: Scripts was read" in error


def test_every_rule_runs_with_only_what_it_declares():
    # each rule alone on a file that exercises models, scripts and loaders:
    # an undeclared read would surface as an internal error
    src = SRC + textwrap.dedent(
        """
        loader = torch.utils.data.DataLoader([1, 2])
        ckpt = torch.load("w.pt")
        for x, y in loader:
            model(x)
        """
    )
    for code in all_rules():
        result = lint_source(src, "m.py", codes=[code])
        assert result.internal_errors == [], code
