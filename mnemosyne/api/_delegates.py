"""How :class:`~mnemosyne.api.repo.Repo` hands a public method to the part that owns it.

``Repo`` holds its parts as attributes (ADR 25). Where a part's method is the
public method, word for word, ``Repo`` does not restate it: :func:`delegate`
makes the method of ``Repo`` that calls the part's, carrying its signature and
docstring, so ``help(Repo)``, ``inspect.signature`` and mypy see the part's
method as ``Repo``'s own (ADR 63). Where ``Repo`` must keep the signature itself
(a class method returning a ``Repo``, which a part below ``repo`` cannot name),
:func:`documented_by` gives it the docstring of the function that does the work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


def delegate(method: Callable[Concatenate[Any, P], R], *, via: str) -> Callable[Concatenate[Any, P], R]:
    """A method that calls ``method`` on the part its instance holds as attribute ``via``.

    The method is a plain function (``Repo.x`` is a function, ``repo.x`` a bound
    method); it wraps ``method``, so its name, docstring and signature are
    ``method``'s.
    """

    @functools.wraps(method)
    def call(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(getattr(self, via), *args, **kwargs)

    return call


def documented_by(source: Callable[..., Any]) -> Callable[[F], F]:
    """A decorator giving a function the docstring of ``source``, its signature left as it is."""

    def document(function: F) -> F:
        function.__doc__ = source.__doc__
        return function

    return document
