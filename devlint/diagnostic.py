"""The records rules produce and reporters consume: diagnostics, fixes, edits."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover - libcst is imported only when a file is parsed
    import libcst as cst


class FixSafety(str, enum.Enum):
    """Whether a fix keeps the behaviour of correct code (ruff's applicability)."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Edit:
    """A text edit in 1-based line / 1-based column coordinates (end exclusive)."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int
    content: str

    def to_json(self) -> Dict[str, Any]:
        return {
            "start": {"line": self.start_line, "column": self.start_col},
            "end": {"line": self.end_line, "column": self.end_col},
            "content": self.content,
        }


@dataclass
class Fix:
    """A fix as libcst node replacements: each (original node, new node) pair.

    Replacing a node with ``cst.RemovalSentinel.REMOVE`` deletes it (only
    allowed where libcst allows removal, e.g. a statement).
    """

    replacements: List[Tuple[cst.CSTNode, Any]]
    safety: FixSafety = FixSafety.SAFE
    description: str = ""
    #: filled in by the engine once positions are known
    edits: List[Edit] = field(default_factory=list)

    @property
    def is_safe(self) -> bool:
        return self.safety == FixSafety.SAFE


@dataclass
class Diagnostic:
    """One finding. ``node`` is dropped once the engine has resolved positions."""

    code: str
    name: str
    message: str
    path: str = ""
    line: int = 0
    col: int = 0  # 1-based
    end_line: int = 0
    end_col: int = 0
    fix: Optional[Fix] = None
    #: why there is no fix, when there is none
    no_fix_reason: str = ""
    node: Optional[cst.CSTNode] = field(default=None, repr=False, compare=False)
    source_line: str = ""
    #: in a notebook: the cell (1-based among all cells); line and column are then in that cell
    cell: Optional[int] = None
    #: in a notebook: the cell as Jupyter shows it, ``In [N]`` (N: its execution
    #: count, else its position among the code cells)
    cell_label: str = ""
    #: in a notebook: the line of the notebook's JSON text holding the finding's line (0: unknown)
    file_line: int = 0
    #: where the other half of a cross-file finding is: (path, line, what is there)
    related: List[Tuple[str, int, str]] = field(default_factory=list)

    @property
    def cell_name(self) -> str:
        """How findings name their notebook cell: ``In [N]``."""
        return self.cell_label or f"cell {self.cell}"

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def sort_key(self) -> Tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.col, self.code)

    def to_json(self) -> Dict[str, Any]:
        fix = None
        if self.fix is not None:
            fix = {
                "applicability": self.fix.safety.value,
                "message": self.fix.description,
                "edits": [e.to_json() for e in self.fix.edits],
            }
        out = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "filename": self.path,
            "location": {"line": self.line, "column": self.col},
            "end_location": {"line": self.end_line, "column": self.end_col},
            "fix": fix,
            "no_fix_reason": self.no_fix_reason or None,
        }
        if self.cell is not None:  # notebooks: location, end_location and edits are in the cell
            out["cell"] = self.cell
            out["cell_label"] = self.cell_name
            out["notebook_line"] = self.file_line or None
        if self.related:
            out["related"] = [{"filename": p, "line": l, "message": m} for p, l, m in self.related]
        return out

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Diagnostic":
        """Rebuild a diagnostic from :meth:`to_json` (used by the result cache)."""
        fix = None
        if data.get("fix"):
            f = data["fix"]
            fix = Fix(
                replacements=[],
                safety=FixSafety(f["applicability"]),
                description=f.get("message", ""),
                edits=[
                    Edit(
                        e["start"]["line"], e["start"]["column"],
                        e["end"]["line"], e["end"]["column"], e["content"],
                    )
                    for e in f.get("edits", [])
                ],
            )
        return cls(
            code=data["code"],
            name=data["name"],
            message=data["message"],
            path=data["filename"],
            line=data["location"]["line"],
            col=data["location"]["column"],
            end_line=data["end_location"]["line"],
            end_col=data["end_location"]["column"],
            fix=fix,
            no_fix_reason=data.get("no_fix_reason") or "",
            cell=data["cell"] if type(data.get("cell")) is int else None,
            cell_label=data["cell_label"] if isinstance(data.get("cell_label"), str) else "",
            file_line=data["notebook_line"] if type(data.get("notebook_line")) is int else 0,
            related=[
                (str(r["filename"]), int(r["line"]), str(r["message"]))
                for r in data.get("related") or []
                if isinstance(r, dict) and type(r.get("line")) is int and "filename" in r and "message" in r
            ],
        )


@dataclass
class FileResult:
    """What checking or fixing one file produced; round-trips through JSON
    (:meth:`to_json` / :meth:`from_json`) for the result cache."""

    path: str
    diagnostics: List[Diagnostic] = field(default_factory=list)
    #: a one-line problem that stopped the file from being checked (unreadable, undecodable)
    error: Optional[str] = None
    #: one-line internal errors (a crashed rule, a fix that broke the code)
    internal_errors: List[str] = field(default_factory=list)
    #: set by fixing: the fixed text and the codes of the fixes applied
    fixed_text: Optional[str] = None
    applied: List[Diagnostic] = field(default_factory=list)
    skipped: bool = False  # no enabled rule could fire (pre-filter)
    #: in a project run: what the file exports to the project index
    #: (``devlint.project.summary``), and the digest of each summary of
    #: another module its check read (the cached result is valid while they are)
    summary: Optional[dict] = None
    consulted: Dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {
            "path": self.path,
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "error": self.error,
            "internal_errors": self.internal_errors,
            "skipped": self.skipped,
        }
        if self.summary is not None:
            out["summary"] = self.summary
        if self.consulted:
            out["consulted"] = self.consulted
        return out

    @classmethod
    def from_json(cls, data: dict) -> "FileResult":
        return cls(
            path=data["path"],
            diagnostics=[Diagnostic.from_json(d) for d in data["diagnostics"]],
            error=data.get("error"),
            internal_errors=list(data.get("internal_errors", [])),
            skipped=bool(data.get("skipped")),
            summary=data.get("summary") if isinstance(data.get("summary"), dict) else None,
            consulted={str(k): str(v) for k, v in data.get("consulted", {}).items()} if isinstance(data.get("consulted"), dict) else {},
        )
