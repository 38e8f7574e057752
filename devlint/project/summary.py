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
from dataclasses import asdict, fields
from typing import Any, Callable, Dict, Optional

from devlint.facts.classes import AttributeFacts, ClassFacts, FileFacts, FunctionFacts

#: bump when the shape or the meaning of a summary changes
SUMMARY_VERSION = 1

#: ClassFacts fields a dependent file never reads (every assignment with its
#: source text: only the class's own rules read them)
_LOCAL_ONLY = frozenset({"assignments"})


_CLASS_LINE = re.compile(r"^[ \t]*class[ \t]+(\w+)", re.M)


def class_lines(text: str) -> Dict[str, int]:
    """Class name -> the line of its first ``class`` statement."""
    out: Dict[str, int] = {}
    for m in _CLASS_LINE.finditer(text):
        out.setdefault(m.group(1), text.count("\n", 0, m.start()) + 1)
    return out


def export(facts: FileFacts, module: str, absolute: Callable[[str], str], text: str = "") -> Dict[str, Any]:
    """The summary of one file whose module name is ``module``.
    ``absolute(name)`` turns a class name as the file spells it (a local
    class, an imported qualified name) into the absolute name of the class;
    ``text``: the file's source, for the lines of its classes."""
    lines = class_lines(text) if text else {}

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
        record["bases"] = [name_of(b) for b in cls.bases]
        # the order of the calls a method makes on self means nothing to another file
        record["methods"] = {m: dict(asdict(fn), self_calls=sorted(fn.self_calls)) for m, fn in cls.methods.items()}
        attrs = {}
        for a, rec in cls.attributes.items():
            d = asdict(rec)
            d["module_class"] = name_of(rec.module_class)
            d["element_class"] = name_of(rec.element_class)
            attrs[a] = d
        record["attributes"] = attrs
        record = json.loads(json.dumps(record, default=sorted))  # sets -> lists, tuples -> lists
        classes[name] = record
    return {"version": SUMMARY_VERSION, "module": module, "classes": classes}


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
    cls.origin = module
    return cls
