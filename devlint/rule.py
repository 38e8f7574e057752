"""The rule API: a rule is a libcst visitor class with its documentation,
examples and fix safety; the engine discovers rule modules under
``devlint.rules`` and never names one.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Dict, List, Optional, Sequence, Tuple, Type

import libcst as cst

from devlint.diagnostic import Diagnostic, Fix, FixSafety
from devlint.facts.classes import ClassFacts, Classes, FileFacts, FunctionFacts
from devlint.facts.scripts import ScriptFacts, Scripts
from devlint.facts.store import FactStore, Provider
from devlint.facts.training import Training, TrainingFacts
from devlint.syntax import code_of

if TYPE_CHECKING:  # pragma: no cover
    from devlint.facts.flow import DeviceFlow
    from devlint.scan import ScanSummary

DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety")


@dataclass(frozen=True)
class Valid:
    """Code the rule must stay silent on."""

    code: str


@dataclass(frozen=True)
class Invalid:
    """Code the rule must report; ``expected`` is the code after its fix
    (``None``: reported without a fix). ``unsafe``: the fix needs
    ``--unsafe-fixes``."""

    code: str
    expected: Optional[str] = None
    count: int = 1
    unsafe: bool = False


class Context:
    """What a rule knows while the engine walks a file: the facts (a
    :class:`~devlint.facts.store.FactStore`: each provider built on first
    read) and where the walk is (class, method, function stack). Maintained
    by the engine; rules only read it."""

    def __init__(self, store: FactStore, path: str) -> None:
        self.store = store
        self.module = store.module
        self.path = path
        self.class_stack: List[Optional[ClassFacts]] = []
        self.function_stack: List[cst.FunctionDef] = []
        # function depth at which each class was entered
        self._class_depths: List[int] = []

    @property
    def facts(self) -> FileFacts:
        """The classes, imports and module-level names (:class:`Classes`)."""
        return self.store[Classes]

    @property
    def device_flow(self) -> "DeviceFlow":
        """The file's device flow (:mod:`devlint.facts.flow`), shared by
        every rule that declares ``Flow``."""
        from devlint.facts.flow import Flow

        return self.store[Flow]

    # -- where are we ------------------------------------------------------
    @property
    def current_class(self) -> Optional[ClassFacts]:
        """The class whose body (or method) we are in, if the method is
        directly in that class."""
        if not self.class_stack:
            return None
        return self.class_stack[-1]

    @property
    def current_method(self) -> Optional[cst.FunctionDef]:
        """The method of :attr:`current_class` we are in (outermost function
        inside the class), or None."""
        if not self.class_stack or self.class_stack[-1] is None:
            return None
        depth = self._class_depths[-1]
        if len(self.function_stack) > depth:
            return self.function_stack[depth]
        return None

    @property
    def current_method_facts(self) -> Optional[FunctionFacts]:
        cls, m = self.current_class, self.current_method
        if cls is None or m is None:
            return None
        return cls.methods.get(m.name.value)

    @property
    def current_function(self) -> Optional[cst.FunctionDef]:
        return self.function_stack[-1] if self.function_stack else None

    @property
    def in_module_class(self) -> bool:
        cls = self.current_class
        return cls is not None and cls.is_module

    @property
    def in_forward(self) -> bool:
        """Inside ``forward`` of an nn.Module, or a method ``forward`` calls."""
        cls, m = self.current_class, self.current_method
        return cls is not None and cls.is_module and m is not None and m.name.value in cls.forward_reachable

    @property
    def self_name(self) -> str:
        """The name the current method calls its instance; "" in a
        @staticmethod, whose first parameter is not the module."""
        m = self.current_method
        facts = self.current_method_facts
        if facts is not None and facts.is_static:
            return ""
        if m is not None and m.params.params:
            return m.params.params[0].name.value
        return "self"

    # -- device anchors ----------------------------------------------------
    def device_anchor(self) -> Tuple[Optional[str], str]:
        """An expression for "the device this replica runs on", and, when
        there is none, why. Preference: a tensor parameter of the current
        method; a parameter or buffer the module holds directly. Never
        ``next(self.parameters())``: empty inside DataParallel replicas."""
        fn = self.current_method_facts
        cls = self.current_class
        if fn is not None:
            shadowed = self._assigned_names()
            for p in fn.tensor_params:
                if p not in shadowed:
                    return f"{p}.device", ""
        if cls is not None and cls.is_module and not (fn is not None and fn.is_static):
            s = self.self_name
            for name in cls.buffers + cls.parameters:
                return f"{s}.{name}.device", ""
            for name, attr in cls.attributes.items():
                if attr.kind == "parameter":
                    return f"{s}.{name}.device", ""
            for name, attr in cls.attributes.items():
                if attr.kind == "module" and attr.module_class.rsplit(".", 1)[-1] in _weighted() and attr.module_class.startswith("torch.nn."):
                    return f"{s}.{name}.weight.device", ""
        return None, "no tensor argument or directly held parameter to take the device from"

    def _assigned_names(self) -> set:
        """Names re-bound in the current method (a parameter re-bound to a
        non-tensor cannot anchor a device)."""
        m = self.current_method
        if m is None:
            return set()
        names = set()
        for stmt in m.body.body if isinstance(m.body, cst.IndentedBlock) else ():
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for t in small.targets:
                            if isinstance(t.target, cst.Name) and not _is_tensor_method_of(small.value, t.target.value):
                                names.add(t.target.value)
        return names


def _is_tensor_method_of(value: cst.BaseExpression, name: str) -> bool:
    # ``x = x.view(...)``, ``x = self.embed(x)`` keep x a tensor
    return name in code_of(value)


def _weighted() -> frozenset:
    from devlint.torch_api import WEIGHTED_LAYERS

    return WEIGHTED_LAYERS


class Rule(cst.CSTVisitor):
    """Base class of every rule.

    Subclasses set ``code``, ``name``, ``message``, ``fix_safety``, a module
    docstring with the sections of :data:`DOC_SECTIONS`, ``VALID`` and
    ``INVALID`` examples, and ``tokens``: text of which at least one must
    appear in a file for the rule to possibly fire (files with none are
    skipped without parsing). Visit methods call :meth:`report`.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    fix_safety: ClassVar[str] = "safe"  # "safe", "unsafe" or "safe/unsafe"
    tokens: ClassVar[Tuple[str, ...]] = ("torch",)
    enabled_by_default: ClassVar[bool] = True
    #: the fact providers the rule reads besides :class:`Classes` (which
    #: every rule may read): ``(Flow,)``, ``(Scripts, Training)``; reading
    #: one not declared raises :class:`~devlint.facts.store.UndeclaredFact`
    requires: ClassVar[Tuple[Type[Provider], ...]] = ()
    VALID: ClassVar[Sequence[Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, context: Context) -> None:
        super().__init__()
        self.context = context
        self.diagnostics: List[Diagnostic] = []

    @classmethod
    def candidate(cls, scan: "ScanSummary") -> bool:
        """Can this rule fire in the file ``scan`` summarises? Answered from
        the cheap ``ast`` scan (:mod:`devlint.scan`) before libcst parses the
        file; when no enabled rule is a candidate the parse is skipped.

        Must over-approximate the visitor: return False only when the rule
        certainly reports nothing (a wrong False drops a finding, a wrong True
        only costs time). The default, for a rule without a hook, is True.
        """
        return True

    @property
    def facts(self) -> FileFacts:
        return self.context.facts

    @property
    def scripts(self) -> ScriptFacts:
        """How models are built, wrapped and placed (declare ``Scripts``)."""
        return self.context.store[Scripts]

    @property
    def training(self) -> TrainingFacts:
        """Loaders, placements and devices per scope (declare ``Training``)."""
        return self.context.store[Training]

    def report(
        self,
        node: cst.CSTNode,
        message: Optional[str] = None,
        fix: Optional[Fix] = None,
        no_fix_reason: str = "",
    ) -> None:
        self.diagnostics.append(
            Diagnostic(
                code=self.code,
                name=self.name,
                message=message or self.message,
                fix=fix,
                no_fix_reason=no_fix_reason if fix is None else "",
                node=node,
            )
        )

    def replace(
        self,
        node: cst.CSTNode,
        new: object,
        description: str,
        safety: FixSafety = FixSafety.SAFE,
    ) -> Fix:
        """A one-node fix."""
        return Fix(replacements=[(node, new)], safety=safety, description=description)

    @classmethod
    def documentation(cls) -> str:
        import sys

        doc = sys.modules[cls.__module__].__doc__ or ""
        return doc.strip()

    @classmethod
    def summary(cls) -> str:
        doc = cls.documentation()
        m = re.search(r"## What it does\s*\n(.+?)(?:\n\n|\n##)", doc, re.S)
        text = m.group(1) if m else doc.split("\n", 1)[0]
        return " ".join(text.split())


@functools.lru_cache(maxsize=None)
def all_rules() -> Dict[str, Type[Rule]]:
    """Every rule class found under ``devlint.rules``, by code (sorted).
    Discovered once per process (the rule modules do not change at run time)."""
    import devlint.rules as package

    found: Dict[str, Type[Rule]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{package.__name__}.{info.name}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.__module__ == mod.__name__:
                if obj.code in found:
                    raise RuntimeError(f"two rules share the code {obj.code}")
                found[obj.code] = obj
    return dict(sorted(found.items()))
