"""How a kernel description says which C function it describes: `@describes("name")` next to it.

The C contract of that function (its arguments, summary, modes) is its record in aesgen.functions;
the decorator only pairs the record's name with the description. aesgen.kernels collects the marks
of its modules (`described_in`), so a new description in an existing module needs no line anywhere
else. The mark is an attribute of the function: nothing is registered in a global table.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import TypeVar

from aesgen.dsl import FunctionBuilder

Describe = Callable[[FunctionBuilder], object]
F = TypeVar("F", bound=Callable[..., object])
MARK = "describes"  # the attribute: ((C function, keyword arguments), ...)


def describes(function: str, **options: object) -> Callable[[F], F]:
    """Mark a description as the one of C `function`; `options` are the keyword arguments it is
    called with after the builder (one description, two functions: `decrypt=False` and `True`)."""
    def mark(fn: F) -> F:
        setattr(fn, MARK, (*getattr(fn, MARK, ()), (function, options)))
        return fn
    return mark


def described_in(*modules: ModuleType) -> dict[str, Describe]:
    """C function -> description, for every description these modules define and mark."""
    found: dict[str, Describe] = {}
    for module in modules:
        for obj in vars(module).values():
            if getattr(obj, "__module__", None) != module.__name__:
                continue  # imported from another module: counted there
            for function, options in getattr(obj, MARK, ()):
                if function in found:
                    raise ValueError(f"two descriptions of {function}")
                found[function] = partial(obj, **options) if options else obj
    return found
