"""What a file exports to the project index: a narrow, versioned JSON record.

Per class, the record the :class:`~devlint.facts.classes.Classes` provider
keeps (bases, module-ness, ``device``, methods with their parameters and
what they call on ``self``, forward reach, attributes with the class of each
submodule and the device it is pinned to, parameters, buffers, a device
anchor, ``_no_split_modules``), with every class name made absolute
(``models.Block``, never ``Block`` or ``.models.Block``), so the file that
imports it can follow it further. Nothing in it is a syntax node; lines are
kept so a finding can say where the other half of a bug is.

The digest of a summary (``devlint.project.index.digest``) is what a dependent file's cached result depends
on: an edit that leaves the summary unchanged re-checks nothing else.
"""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, asdict, fields
from typing import Any, Callable, Dict, Sequence

import libcst as cst

from devlint.syntax import catches_stop_iteration, first_parameter_of
from devlint.walk import walk

from devlint.facts.classes import AttributeFacts, ClassFacts, FileFacts, FunctionFacts

#: bump when the shape or the meaning of a summary changes
SUMMARY_VERSION = 8

#: ClassFacts fields a dependent file never reads as they are (every
#: assignment with its source text); a subclass in another file reads only
#: which methods assign an attribute, and as what (``assigned_in``). The
#: pinning methods and the parts ``forward`` hands its inputs serve the
#: class's own file (``pins_optional``, its stages) and travel as what they
#: gave
_LOCAL_ONLY = frozenset({"assignments", "pinning_methods", "input_parts", "entry_reads", "class_tensors"})


_CLASS_LINE = re.compile(r"^[ \t]*class[ \t]+(\w+)", re.M)


def class_lines(text: str) -> Dict[str, int]:
    """Class name -> the line of its first ``class`` statement."""
    out: Dict[str, int] = {}
    for m in _CLASS_LINE.finditer(text):
        out.setdefault(m.group(1), text.count("\n", 0, m.start()) + 1)
    return out


_SELF_STORE = re.compile(r"^[ \t]*\w+\.(\w+)[ \t]*(?::[^=\n]*)?=(?!=)", re.M)


def _store_lines(text: str) -> list:
    """(line, attribute) of every ``<name>.<attr> = ...`` statement, in order."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _SELF_STORE.finditer(text)]


def export(facts: FileFacts, module: str, absolute: Callable[[str], str], text: str = "",
           tree: "cst.Module | None" = None) -> Dict[str, Any]:
    """The summary of one file whose module name is ``module``.
    ``absolute(name)`` turns a class name as the file spells it (a local
    class, an imported qualified name) into the absolute name of the class;
    ``text``: the file's source, for the lines of its classes; ``tree``: its
    parse, for the properties that take the first parameter."""
    lines = class_lines(text) if text else {}
    stores = _store_lines(text) if text else []
    firsts = _first_parameter_properties(tree) if tree is not None else {}

    def name_of(n: str) -> str:
        if not n:
            return n
        if n in facts.classes:
            return f"{module}.{n}"
        return absolute(n)

    classes: Dict[str, Any] = {}
    for name, cls in facts.classes.items():
        record = {f.name: getattr(cls, f.name) for f in fields(ClassFacts) if f.name not in _LOCAL_ONLY}
        record["line"] = lines.get(name, 0)
        record["first_parameter_properties"] = firsts.get(name, [])
        record["bases"] = [name_of(b) for b in cls.bases]
        # the order of the calls a method makes on self means nothing to another file
        # methods and attributes keep only what differs from the defaults
        # (``class_from_summary`` fills the rest): the index of a large
        # project holds tens of thousands of them, in the parent and in
        # every worker
        record["methods"] = {
            m: _not_default(dict(asdict(fn), self_calls=sorted(fn.self_calls)), _FUNCTION_DEFAULTS)
            for m, fn in cls.methods.items()
        }
        attrs = {}
        for a, rec in cls.attributes.items():
            d = asdict(rec)
            d["module_class"] = name_of(rec.module_class)
            d["element_class"] = name_of(rec.element_class)
            # where a finding in another file can point: the first store after the class line
            d["line"] = next((ln for ln, at in stores if at == a and ln > record["line"]), 0)
            attrs[a] = _not_default(d, _ATTRIBUTE_DEFAULTS)
        record["attributes"] = attrs
        # whether self.device is set only while the module is built, for a
        # subclass whose forward reads it (a device captured in a base class)
        assigned_in: Dict[str, set] = {}
        for a in cls.assignments:
            assigned_in.setdefault(a.name, set()).add((a.method, a.kind))
        record["assigned_in"] = {a: sorted(v) for a, v in sorted(assigned_in.items())}
        record = json.loads(json.dumps(record, default=sorted))  # sets -> lists, tuples -> lists
        classes[name] = record
    return {"version": SUMMARY_VERSION, "module": module, "classes": classes}


def needs_parse(scan: Any, exports: Sequence[str]) -> bool:
    """Whether a file no rule needs must be parsed for its summary: the scan
    shows something of it an importer may ask beyond which classes are
    modules (a class that places a part on a device outside ``forward``,
    reads ``.parameters()``, declares ``_no_split_modules`` or has a
    ``device``; an exported function that may return a CPU tensor, wrap a
    model or read a parameter). Otherwise :func:`export_light` summarises it
    from the scan, with the buffers each class registers (a subclass that
    assigns a tensor to a name its base registered updates that buffer:
    DL006 asks)."""
    for call in scan.calls:
        if call.cls is None:
            continue
        if call.attr == "parameters":
            return True
        if call.attr in ("to", "cuda") and call.device_arg is not None and not scan.in_forward(call.cls, call.method):
            return True  # self.head = nn.Linear(...).to("cuda:1"), block.to(devices[i])
    if "_no_split_modules" in scan.class_body_names:
        return True
    if any("device" in methods for methods in scan.methods.values()) or scan.self_device_stores:
        return True
    return bool(exports) and bool(exported_function_kinds(scan, exports))


def exported_function_kinds(scan: Any, exports: Sequence[str]) -> Dict[str, set]:
    """For each exported module-level function, what its calls may make it
    (a bound on :func:`function_summaries`): "returns" (a torch factory
    called without ``device=`` in it, or in a function of the file it calls),
    "wraps" (a wrapper), "first_parameter" (``.parameters()``), "loader"
    (a ``DataLoader`` built in it, or in a function of the file it calls),
    "loads" (``torch.load(..., map_location=...)``), "unwraps" (a ``.module``
    read, or a ``getattr`` call in a file that spells ``"module"``)."""
    from devlint.torch_api import DATA_LOADERS, DEVICE_FACTORIES, TORCH_LOADS, WRAPPERS

    everything = "*" in exports
    kinds: Dict[str, set] = {}
    calls: Dict[str, set] = {}
    for call in scan.calls:
        fn = call.function
        if call.cls is not None or fn is None:
            continue
        k = kinds.setdefault(fn, set())
        if call.attr == "parameters":
            k.add("first_parameter")
        if any(q in WRAPPERS for q in scan.resolve(call.func)):
            k.add("wraps")
        if (call.func or "").rsplit(".", 1)[-1] == "DataLoader" or scan.refers_to(call.func, DATA_LOADERS):
            k.add("loader")
        if "map_location" in call.keywords and scan.refers_to(call.func, TORCH_LOADS):
            k.add("loads")
        if "device" not in call.keywords and not call.has_star_kwargs and (
            scan.torch_functions(call.func) & (DEVICE_FACTORIES | {"from_numpy"})
        ):
            k.add("returns")
        elif scan.torch_functions(call.func):
            k.add("follows")  # torch.stack([c, -s]): may compute on its arguments
        if call.func == "getattr" and "module" in scan.strings:
            k.add("unwraps")  # getattr(m, "module", m): only that unwraps (function_summaries)
        if call.func and call.func in scan.function_names:
            calls.setdefault(fn, set()).add(call.func)
    for fn in scan.module_readers:
        kinds.setdefault(fn, set()).add("unwraps")
    changed = True
    while changed:  # a function calling one of the file's CPU-making (loader-making) functions may return its result
        changed = False
        for fn, callees in calls.items():
            for kind in ("returns", "loader"):
                if kind not in kinds.get(fn, set()) and any(kind in kinds.get(c, set()) for c in callees):
                    kinds.setdefault(fn, set()).add(kind)
                    changed = True
    return {fn: k for fn, k in kinds.items() if k and (everything or fn in exports)}


def export_light(scan: Any, module: str, absolute: Callable[[str], str], text: str) -> Dict[str, Any]:
    """The summary of a file no rule needs and :func:`needs_parse` lets go,
    from the scan alone: its classes, their bases and whether each may be a
    module or has a ``device``; nothing else (no parse)."""
    lines = class_lines(text)
    classes: Dict[str, Any] = {}
    for name, bases in scan.bases.items():
        shown = []
        for b in bases:
            if b in scan.bases:
                shown.append(f"{module}.{b}")
            else:
                targets = scan.resolve(b)
                shown.append(absolute(targets[0]) if targets else b)
        classes[name] = {
            "name": name, "line": lines.get(name, 0), "bases": shown,
            "is_module": scan.class_may_be_module(name), "defines_device": not scan.class_may_lack_device(name),
            "anchor_tensor": _light_anchor(scan, name), "light": True,
            "tensor_fields": list(scan.tensor_fields.get(name, ())),
            "buffers": list(scan.class_buffers.get(name, ())),
        }
    return {"version": SUMMARY_VERSION, "module": module, "classes": dict(sorted(classes.items()))}


def _light_anchor(scan: Any, cls: str) -> str:
    """A path to a tensor an instance of ``cls`` holds, from the scan, in the
    order ``Classes`` picks an anchor: a ``self.<name> = nn.Parameter(...)``,
    else the first buffer the class registers, else the first ``self.<name> =
    nn.Layer(...)`` of its ``__init__`` whose layer has a known parameter
    (``linear_1.weight``); "" when there is none."""
    import ast

    from devlint.torch_api import layer_parameter

    def targets(value: Any) -> list:
        func = value.func
        dotted = []
        while isinstance(func, ast.Attribute):
            dotted.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return []
        dotted.append(func.id)
        return scan.resolve(".".join(reversed(dotted)))

    stores = [(method, name, value) for c, method, name, value in scan.attribute_stores if c == cls and isinstance(value, ast.Call)]
    for _, name, value in stores:
        if any(q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") for q in targets(value)):
            return name
    for name in scan.class_buffers.get(cls, ()):
        return name
    for method, name, value in stores:
        if method != "__init__":
            continue
        for q in targets(value):
            param = layer_parameter(q)
            if param:
                return f"{name}.{param}"
    return ""


def _defaults(cls: type) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for f in fields(cls):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
    return json.loads(json.dumps(out, default=sorted))  # as a summary spells them (sets -> lists)


_ATTRIBUTE_DEFAULTS = _defaults(AttributeFacts)
_FUNCTION_DEFAULTS = _defaults(FunctionFacts)


def _not_default(record: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    """``record`` without the fields whose value is the field's default."""
    out = {}
    for k, v in record.items():
        if k in defaults:
            d = defaults[k]
            plain = json.loads(json.dumps(v, default=sorted)) if isinstance(v, (set, frozenset, tuple)) else v
            if plain == d and type(plain) is type(d):
                continue
        out[k] = v
    return out


def class_from_summary(record: Dict[str, Any], module: str) -> ClassFacts:
    """A :class:`ClassFacts` rebuilt from a summary record, for the file that
    imports the class. Its ``origin`` names the module that defines it."""
    known = {f.name for f in fields(ClassFacts)}
    kwargs = {k: v for k, v in record.items() if k in known and k not in ("methods", "attributes")}
    cls = ClassFacts(**kwargs)
    fn_fields = {f.name for f in fields(FunctionFacts)}
    cls.methods = {m: FunctionFacts(**{k: v for k, v in fn.items() if k in fn_fields}) for m, fn in record.get("methods", {}).items()}
    at_fields = {f.name for f in fields(AttributeFacts)}
    cls.attributes = {a: AttributeFacts(**{k: v for k, v in d.items() if k in at_fields}) for a, d in record.get("attributes", {}).items()}
    cls.assignments = [
        AttributeFacts(name=a, kind=str(kind), method=str(method), line=0)
        for a, pairs in record.get("assigned_in", {}).items()
        for method, kind in pairs
    ]
    cls.origin = module
    return cls


_DEF_LINE = re.compile(r"^(?:async[ \t]+)?def[ \t]+(\w+)", re.M)


def function_summaries(store: Any, exports: Sequence[str], text: str, scan: Any = None) -> Dict[str, Any]:
    """What the module-level functions other files import do with devices,
    as far as a caller needs (``exports``: their names, or "*" for all).
    Narrow on purpose, one record per function that does something a caller
    must know, with the line of its ``def``:

    - ``"returns": "cpu"``: its result is a tensor it creates on the CPU
      whatever it is given (``create_grid(n)`` with ``torch.linspace`` and
      no ``device=``), with the factory that made it (``made_by``); or a
      sequence of such tensors (``return alpha, beta, gamma``, a list it
      fills), with ``items`` (per element of a tuple of known length:
      whether it is 0-dim) or ``elem_scalar`` (for one of unknown length);
    - ``"follows"``: its result is a tensor it computes from its arguments,
      on their device (``torch.stack([c, -s], -1)`` of its parameter);
    - ``"wraps"``: it returns its parameter ``wraps`` (``param``) wrapped in
      ``wrapper`` (on every path, or ``conditional``ly, where
      ``condition_params`` are the other parameters the condition reads),
      whether it ``places`` the parameter on a device first, and the
      wrapper's ``device_ids`` ("" default, a literal, "?" a variable);
    - ``"first_parameter"``: the indices of the parameters whose first
      parameter it takes (``next(m.parameters())``), which raises
      StopIteration when the module given is a DataParallel replica;
    - ``"loader"``: it returns a data loader it builds, whose batches come
      out on the CPU (``cpu``) or may already be on a device (``device``: a
      ``collate_fn`` or dataset that places them);
    - ``"loads"``: the index of its parameter that defaults to ``None`` and
      is ``torch.load``'s ``map_location`` (``loads_param``: its name);
    - ``"unwraps"``: the indices of the parameters whose ``.module`` it may
      return (``ScopeFacts.unwraps_params``): ``model = unwrap(model)`` does
      not hold the wrapper it was given.
    """
    from devlint.facts.flow import CPU, LOCAL, SEQ, TENSOR, Flow
    from devlint.facts.scripts import Scripts
    from devlint.scan import scan_source

    if scan is None:
        scan = scan_source(text)
    kinds = exported_function_kinds(scan, exports) if scan is not None else None
    if kinds is not None and not kinds:
        return {}
    flow = store[Flow]
    loaders = None
    if kinds is None or any("loader" in k for k in kinds.values()):
        from devlint.facts.training import Training

        loaders = store[Training].scopes
    wraps = kinds is None or any("wraps" in k for k in kinds.values())
    helpers = store[Scripts].wrap_helpers if wraps else {}
    # a function returns a parameter's ``.module`` only through a ``.module``
    # read in it or a ``getattr(m, "module", m)``: without either, no
    # ``unwraps_params`` (the script facts' whole walk is not needed)
    unwraps = kinds is None or any(
        "unwraps" in k and (fn in scan.module_readers or "module" in scan.strings) for fn, k in kinds.items()
    )
    scripts = store[Scripts] if unwraps else None
    lines: Dict[str, int] = {}
    for m in _DEF_LINE.finditer(text):
        lines.setdefault(m.group(1), text.count("\n", 0, m.start()) + 1)
    everything = "*" in exports
    out: Dict[str, Any] = {}
    for node in store.module.body:
        if not isinstance(node, cst.FunctionDef) or not (everything or node.name.value in exports):
            continue
        name = node.name.value
        if kinds is not None and name not in kinds:
            continue  # nothing in it can make a record
        record: Dict[str, Any] = {}
        result = flow.base(node) if kinds is None or kinds[name] & {"returns", "follows"} else None
        r = result.returns if result is not None else None
        if result is not None and r.kind == TENSOR and r.device == CPU and r.born and not r.scalar:
            made_by = sorted(result.origin_names.get(b, "") for b in r.born)
            record.update(returns="cpu", made_by=made_by[0] if made_by else "")
        elif result is not None and r.kind == SEQ:
            # ``return alpha, beta, gamma`` / ``return grid`` (a list it
            # appends to): a sequence whose every element is a tensor made
            # there on the CPU; ``items`` says, per element of a sequence of
            # known length, whether it is 0-dim ([] for one of unknown length)
            elems = list(r.items) if r.exact and r.items else ([r.elem] if r.elem is not None else [])
            if elems and all(e.kind == TENSOR and e.device == CPU and e.born for e in elems) and not all(
                e.scalar for e in elems
            ):
                born = set().union(*(e.born for e in elems))
                made_by = sorted(result.origin_names.get(b, "") for b in born)
                record.update(
                    returns="cpu", made_by=made_by[0] if made_by else "",
                    items=[e.scalar for e in elems] if r.exact and r.items else [],
                    elem_scalar=bool(elems[0].scalar) if not (r.exact and r.items) else False,
                )
        if result is not None and "returns" not in record and r.kind == TENSOR and r.device == LOCAL and not r.born:
            # ``rotation_z(alpha)``: a tensor it computes from its arguments,
            # on their device (a caller's CPU tensor comes back on the CPU)
            record["follows"] = True
        firsts = _first_parameter_params(node)
        if firsts:
            record["first_parameter"] = firsts
        if kinds is None or "loads" in kinds[name]:
            from devlint.facts.classes import Classes
            from devlint.facts.training import map_location_parameter

            loads = map_location_parameter(store[Classes], node)
            if loads is not None:
                record.update(loads=loads[0], loads_param=loads[1])
        returned = loaders.get(name) if loaders is not None else None
        if returned is not None and returned.kind == "function" and returned.returns_loader is not None:
            record["loader"] = "device" if returned.returns_loader.places_on_device else "cpu"
        helper = helpers.get(name)
        if helper is not None:
            record.update(wraps=helper.param, param=helper.param_name, wrapper=helper.wrapper,
                          conditional=helper.conditional, condition_params=[list(c) for c in helper.condition_params],
                          places=helper.places, device_ids=helper.device_ids)
        scope = scripts.scope_named(name) if scripts is not None else None
        if scope is not None and scope.unwraps_params:
            record["unwraps"] = list(scope.unwraps_params)
        if record:
            out[name] = dict(record, line=lines.get(name, 0))
    return dict(sorted(out.items()))


class _FirstParameters(cst.CSTVisitor):
    def __init__(self, params: Sequence[str]) -> None:
        self.params = list(params)
        self.found: set = set()

    def _check(self, node: cst.BaseExpression) -> None:
        got = first_parameter_of(node)
        if got is not None and isinstance(got[0], cst.Name) and got[0].value in self.params:
            self.found.add(self.params.index(got[0].value))

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._check(node)

    def visit_Try(self, node: cst.Try) -> bool:
        if any(catches_stop_iteration(h.type) for h in node.handlers):
            # a StopIteration fallback (as DL013 reads it in a file of its own)
            for part in (*node.handlers, node.orelse, node.finalbody):
                if part is not None:
                    walk(part, self)
            return False
        return True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested function is not this one

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _first_parameter_params(fn: cst.FunctionDef) -> list:
    """Indices of the parameters of ``fn`` whose first parameter its body takes."""
    params = [p.name.value for p in fn.params.params]
    if not params:
        return []
    visitor = _FirstParameters(params)
    walk(fn.body, visitor)
    return sorted(visitor.found)


def _first_parameter_properties(tree: cst.Module) -> Dict[str, list]:
    """Class name -> its properties that take the first of ``self.parameters()``
    (top-level classes)."""
    out: Dict[str, list] = {}
    for stmt in tree.body:
        if not isinstance(stmt, cst.ClassDef):
            continue
        found = []
        for fn in stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ():
            if not isinstance(fn, cst.FunctionDef) or not any(
                isinstance(d.decorator, cst.Name) and d.decorator.value == "property" for d in fn.decorators
            ):
                continue
            if 0 in _first_parameter_params(fn):
                found.append(fn.name.value)
        if found:
            out[stmt.name.value] = sorted(found)
    return out
