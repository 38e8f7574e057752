"""Facts as providers: each kind of fact is a :class:`Provider` with the
providers it reads declared in ``requires``; a :class:`FactStore` builds,
lazily and once per file, only what is asked of it, and refuses a read that
nobody declared.

The shape of LibCST's metadata providers (``METADATA_DEPENDENCIES`` and
``get_metadata``), without their resolution pass: a provider is built the
first time a rule (or another provider) asks for it, so a file whose rules
need only the classes never pays for the script facts or the device flow.

A rule declares what it reads (``requires = (Flow,)``); the engine makes one
store per file from the union of the enabled rules' declarations. Reading a
provider outside that union, or, while a provider is being built, one it did
not declare, raises :class:`UndeclaredFact`: a missing declaration is a bug
the tests catch, never a fact silently built or silently empty.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, FrozenSet, Iterable, List, Tuple, Type

import libcst as cst


class UndeclaredFact(LookupError):
    """A provider was read by code that did not declare it."""


class Provider:
    """One kind of fact. Subclasses set ``requires`` and implement
    :meth:`build`, which returns the fact's record for one file."""

    #: the providers :meth:`build` reads (through the store)
    requires: ClassVar[Tuple[Type["Provider"], ...]] = ()

    @classmethod
    def build(cls, store: "FactStore") -> Any:
        raise NotImplementedError


def closure(providers: Iterable[Type[Provider]]) -> FrozenSet[Type[Provider]]:
    """``providers`` and everything they require, transitively."""
    out = set()
    todo = list(providers)
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out.add(p)
        todo.extend(p.requires)
    return frozenset(out)


class FactStore:
    """The facts of one parsed file, built on demand.

    ``declared``: the providers its readers may ask for (with what those
    require). ``store[P]`` builds ``P`` the first time and returns the same
    record afterwards."""

    def __init__(self, module: cst.Module, declared: Iterable[Type[Provider]], project: Any = None) -> None:
        self.module = module
        #: in a project run, the file's :class:`~devlint.project.index.ProjectContext`
        self.project = project
        self.declared = closure(declared)
        self._built: Dict[Type[Provider], Any] = {}
        #: providers being built, innermost last (their reads are checked
        #: against their own ``requires``; a cycle is an error)
        self._building: List[Type[Provider]] = []

    def __getitem__(self, provider: Type[Provider]) -> Any:
        if provider in self._built:
            self._check(provider)
            return self._built[provider]
        self._check(provider)
        if provider in self._building:
            chain = " -> ".join(p.__name__ for p in self._building + [provider])
            raise UndeclaredFact(f"providers require each other: {chain}")
        self._building.append(provider)
        try:
            value = provider.build(self)
        finally:
            self._building.pop()
        self._built[provider] = value
        return value

    def built(self, provider: Type[Provider]) -> bool:
        """Whether ``provider`` has been built (for tests and the benchmarks)."""
        return provider in self._built

    def _check(self, provider: Type[Provider]) -> None:
        if self._building:
            reader = self._building[-1]
            if provider not in closure(reader.requires):
                raise UndeclaredFact(
                    f"provider {reader.__name__} reads {provider.__name__} without declaring it in `requires`"
                )
        elif provider not in self.declared:
            raise UndeclaredFact(
                f"{provider.__name__} was read, but no enabled rule declares it in `requires` "
                f"(declared: {', '.join(sorted(p.__name__ for p in self.declared)) or 'none'})"
            )
