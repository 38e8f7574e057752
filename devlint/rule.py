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
from typing import TYPE_CHECKING, ClassVar, Dict, List, Optional, Sequence, Set, Tuple, Type

import libcst as cst

from devlint.diagnostic import Diagnostic, Fix, FixSafety
from devlint.files import is_test_file
from devlint.facts.classes import ClassFacts, Classes, FileFacts, FunctionFacts
from devlint.facts.scripts import PlaceEvent, ScopeFacts, ScriptFacts, Scripts, WrapEvent
from devlint.facts.store import FactStore, Provider
from devlint.facts.training import Training, TrainingFacts
from devlint.syntax import dotted_name, keyword_arg, positional_args

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
    def in_test_file(self) -> bool:
        """The file is test code (:func:`devlint.files.is_test_file`)."""
        return is_test_file(self.path)

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
    #: one line under 100 characters: what the rule catches (``devlint rule --all``)
    brief: ClassVar[str] = ""
    fix_safety: ClassVar[str] = "safe"  # "safe", "unsafe" or "safe/unsafe"
    tokens: ClassVar[Tuple[str, ...]] = ("torch",)
    #: in a project run, the keys of function summaries (``returns``,
    #: ``wraps``, ``first_parameter``) that make a file naming such a
    #: function of another module a candidate even without ``tokens``
    project_keys: ClassVar[Tuple[str, ...]] = ()
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
        related: Sequence[Tuple[str, int, str]] = (),
    ) -> None:
        """Report a finding at ``node``. ``related``: where the other half of
        a cross-file finding is, as (path, line, what is there)."""
        self.diagnostics.append(
            Diagnostic(
                code=self.code,
                name=self.name,
                message=message or self.message,
                fix=fix,
                no_fix_reason=no_fix_reason if fix is None else "",
                node=node,
                related=list(related),
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
        """One line under 100 characters (``devlint rule --all``, the rule
        table, SARIF's short description): the rule's ``brief``, else the
        first paragraph of its "What it does"."""
        if cls.brief:
            return cls.brief
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


# --------------------------------------------------------------------------
# rules that follow the script facts (DL003, DL004, DL005, DL012)


@dataclass
class _Frame:
    scope: ScopeFacts
    #: wrapper calls walked so far in the scope (``ModuleRead.wraps_before``)
    wraps: int = 0


@dataclass
class ModuleRead:
    """``<name>.module`` read in a scope, after ``wraps_before`` wrapper calls."""

    name: str
    node: cst.Attribute
    scope: int
    wraps_before: int
    class_name: str = ""


class ScriptRule(Rule):
    """A rule that follows the script facts: ``on_wrap``/``on_place`` are
    called with each wrapper / placement call node and its facts, and
    ``on_scope_end`` when a scope (module or function) has been walked."""

    requires = (Scripts,)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._frames: List[_Frame] = []
        self.module_reads: List[ModuleRead] = []
        self._lines: List[cst.SimpleStatementLine] = []
        self._blocks: List[cst.BaseSuite] = []
        self._block_owner: Dict[int, cst.CSTNode] = {}
        self._elif: Set[int] = set()
        self._parent_block: Dict[int, cst.BaseSuite] = {}
        self._classes: List[str] = []
        #: wrap and placement call node id -> (its statement line, None)
        self.statement_of: Dict[int, Tuple[Optional[cst.SimpleStatementLine], Optional[cst.BaseSuite]]] = {}

    # -- scopes ------------------------------------------------------------
    @property
    def scope(self) -> ScopeFacts:
        return self._frames[-1].scope

    @property
    def wrap_nodes(self) -> Dict[Tuple[int, int], cst.Call]:
        """(scope index, wrap index) -> the wrapper call."""
        return self.scripts.wrap_nodes

    def helper_shown(self, helper: str) -> Tuple[str, List[Tuple[str, int, str]]]:
        """How a message names a wrap helper (``setup_ddp``), and where it is
        (a related location) when another file of the project defines it."""
        found = self.facts.project_function(self.facts.qualify_dotted(helper) or "") if "." not in helper else None
        if found is None:
            return f"`{helper}`", []
        path, line, _ = found
        return f"`{helper}` ({path}:{line})", [(path, line, f"`{helper}` wraps its argument")]

    def _enter(self, node: cst.CSTNode) -> None:
        self._frames.append(_Frame(self.scripts.scope_at[node]))

    def visit_Module(self, node: cst.Module) -> None:
        self._enter(node)

    def leave_Module(self, original_node: cst.Module) -> None:
        self.on_scope_end(self._frames[-1].scope)
        self._frames.pop()
        self.on_file_end()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.on_scope_end(self._frames[-1].scope)
        self._frames.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node.name.value)
        self._block_owner[id(node.body)] = node

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()
        cls = self.facts.classes.get(original_node.name.value)
        if cls is not None:
            self.on_class_end(cls, original_node)

    # -- statements and blocks (for removing a statement) -------------------
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._lines.append(node)
        if self._blocks:
            self._parent_block[id(node)] = self._blocks[-1]

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        self._lines.pop()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.append(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._blocks.pop()

    def visit_If(self, node: cst.If) -> None:
        self._block_owner[id(node.body)] = node
        if isinstance(node.orelse, cst.If):
            self._elif.add(id(node.orelse))
        if self._blocks:
            self._parent_block[id(node)] = self._blocks[-1]

    # -- calls -------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call) -> None:
        frame = self._frames[-1]
        ev = self.scripts.wrap_at.get(original_node)
        if ev is not None:
            frame.wraps += 1
            self.statement_of[id(original_node)] = (self._lines[-1] if self._lines else None, None)
            self.on_wrap(original_node, frame.scope, ev)
            return
        ev2 = self.scripts.place_at.get(original_node)
        if ev2 is not None:
            self.statement_of[id(original_node)] = (self._lines[-1] if self._lines else None, None)
            self.on_place(original_node, frame.scope, ev2)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "module" or not self._frames:
            return
        name = dotted_name(node.value)
        if name is not None:
            frame = self._frames[-1]
            self.module_reads.append(
                ModuleRead(name, node, frame.scope.index, frame.wraps, self._classes[-1] if self._classes else "")
            )

    # -- hooks -------------------------------------------------------------
    def on_wrap(self, node: cst.Call, scope: ScopeFacts, event: WrapEvent) -> None:
        pass

    def on_place(self, node: cst.Call, scope: ScopeFacts, event: PlaceEvent) -> None:
        pass

    def on_scope_end(self, scope: ScopeFacts) -> None:
        pass

    def on_class_end(self, cls: ClassFacts, node: cst.ClassDef) -> None:
        pass

    def on_file_end(self) -> None:
        """Everything has been walked: every node in ``module_reads`` and
        ``statement_of`` is known."""

    # -- fixes -------------------------------------------------------------
    def remove_statement(self, line: cst.SimpleStatementLine) -> List[Tuple[cst.CSTNode, object]]:
        """Replacements deleting ``line``: the line itself when its block
        keeps other statements (comments above it move to the next
        statement), the enclosing ``if`` when the line was all it guarded,
        else ``pass``."""
        block = self._parent_block.get(id(line))
        body = block.body if isinstance(block, cst.IndentedBlock) else None
        if body is None and block is None:
            body = self.context.module.body  # module level
        if body is not None and len(body) > 1:
            return [(line, cst.RemovalSentinel.REMOVE)] + self._keep_comments(line, body)
        owner = self._block_owner.get(id(block)) if block is not None else None
        parent = self._parent_block.get(id(owner)) if owner is not None else None
        if (
            isinstance(owner, cst.If)
            and owner.orelse is None
            and id(owner) not in self._elif
            and isinstance(parent, cst.IndentedBlock)
            and len(parent.body) > 1
            and not any(l.comment for l in line.leading_lines)
        ):
            return [(owner, cst.RemovalSentinel.REMOVE)] + self._keep_comments(owner, parent.body)
        return [(line, line.with_changes(body=[cst.Pass()]))]

    @staticmethod
    def _keep_comments(stmt: cst.CSTNode, body: Sequence[cst.CSTNode]) -> List[Tuple[cst.CSTNode, object]]:
        leading = list(getattr(stmt, "leading_lines", ()))
        if not any(l.comment for l in leading):
            return []
        index = next((i for i, s in enumerate(body) if s is stmt), -1)
        if index < 0 or index + 1 >= len(body):
            return []
        nxt = body[index + 1]
        if not hasattr(nxt, "leading_lines"):
            return []
        return [(nxt, nxt.with_changes(leading_lines=leading + list(nxt.leading_lines)))]

    def unwrap_replacements(self, node: cst.Call, event: WrapEvent) -> Optional[List[Tuple[cst.CSTNode, object]]]:
        """Replacements that remove the wrapper call ``node``: the statement
        ``model = DP(model)`` goes, else the call becomes its first argument."""
        args = positional_args(node)
        first = args[0].value if args else (keyword_arg(node, "module").value if keyword_arg(node, "module") else None)
        if first is None:
            return None
        line, _ = self.statement_of.get(id(node), (None, None))
        if (
            line is not None
            and event.target
            and event.target == event.wrapped
            and not event.placed_after
            and len(line.body) == 1
            and isinstance(line.body[0], cst.Assign)
            and line.body[0].value is node
        ):
            return self.remove_statement(line)
        return [(node, first)]

    def module_read_fixes(self, name: str, scope: ScopeFacts, after_wraps: int, depth: int = 1) -> List[Tuple[cst.CSTNode, object]]:
        """``name.module`` -> ``name`` (``depth=2``: ``name.module.module`` ->
        ``name.module``) for the reads after the ``after_wraps``-th wrapper
        call of ``scope``; for ``self.x`` also the reads in the other methods
        of the class."""
        read_name = name if depth == 1 else f"{name}.module"
        is_attr = bool(scope.class_name and scope.params and name.startswith(scope.params[0] + "."))
        out: List[Tuple[cst.CSTNode, object]] = []
        for r in self.module_reads:
            if r.name != read_name:
                continue
            if r.scope == scope.index:
                if r.wraps_before <= after_wraps:
                    continue
            elif not (is_attr and r.class_name == scope.class_name):
                continue
            out.append((r.node, r.node.value))
        return out

    def class_read_fixes(self, class_name: str, attr_names: Sequence[str]) -> List[Tuple[cst.CSTNode, object]]:
        """``self.<attr>.module`` -> ``self.<attr>`` everywhere in a class."""
        out: List[Tuple[cst.CSTNode, object]] = []
        for r in self.module_reads:
            head, _, attr = r.name.partition(".")
            if r.class_name == class_name and attr in attr_names and "." not in attr:
                out.append((r.node, r.node.value))
        return out
