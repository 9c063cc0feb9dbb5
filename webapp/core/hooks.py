"""Reads a lower domain shows and a higher domain answers: typed hooks, filled by name (issue 42 item 3).

Dependencies run one way (docs/architecture.md, "Layers"): runs may not import grading, yet the
run page hides the model signals of drafts a blind grader has not graded, which only grading
knows. The lower domain declares what it asks, with the signature it wants, in its `hooks.py`:

    @hook
    def grade_counts(session: Session, draft_ids: list[int]) -> dict[int, int]:
        \"\"\"Return how many grades each of these drafts has (grading answers).\"\"\"
        ...

and calls it like a function. The domain that knows the answer fills it in its `provides.py`:

    PROVIDES = (runs_hooks.grade_counts.by(status.grade_counts),)

(pyright checks the answer against the declared signature). The first call of any hook finds every
domain's `provides.py` through webapp/core/domains.py, like reactions and home cards, so the app,
the command line, the jobs and the tests all get the same answers, and nothing imports a
`provides.py` by hand. A hook nobody answers, or one answered twice, fails naming it: no code
tolerates a missing domain.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, ParamSpec, TypeVar, cast

from webapp.core.domains import DOMAINS, domain_modules

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Answer:
    """A domain's answer to one hook: the hook's name and the function that answers it."""

    hook: str
    answer: Callable[..., object]


class HookError(LookupError):
    """A hook that no domain answers, or that two answer."""


class Hook(Generic[P, R]):
    """A question a lower domain asks and a higher one answers; calling it calls the answer."""

    def __init__(self, declared: Callable[P, R]) -> None:
        self.declared = declared  # its signature is the contract; its body is never run
        self.name = f"{declared.__module__}.{declared.__qualname__}"
        self.__doc__ = declared.__doc__

    def __repr__(self) -> str:
        return f"<hook {self.name}>"

    def by(self, answer: Callable[P, R]) -> Answer:
        """Return this hook answered by `answer` (for a domain's `PROVIDES`)."""
        return Answer(self.name, answer)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast(Callable[P, R], answer_of(self.name))(*args, **kwargs)


def hook(declared: Callable[P, R]) -> Hook[P, R]:
    """Declare a hook with the signature of `declared` (whose body is never run)."""
    return Hook(declared)


def collect(answers: Iterable[Answer]) -> dict[str, Callable[..., object]]:
    """Return the answers by hook name; a hook answered twice fails."""
    found: dict[str, Callable[..., object]] = {}
    for a in answers:
        if a.hook in found:
            raise HookError(f"hook {a.hook} is answered twice")
        found[a.hook] = a.answer
    return found


@functools.cache
def answers() -> dict[str, Callable[..., object]]:
    """Return every domain's answers (`PROVIDES` in webapp/<domain>/provides.py), found once."""
    return collect(a for module in domain_modules("provides", DOMAINS) for a in module.PROVIDES)


def answer_of(name: str) -> Callable[..., object]:
    """Return the function answering the hook `name`."""
    found = answers().get(name)
    if found is None:
        raise HookError(f"no domain answers the hook {name} (webapp/<domain>/provides.py)")
    return found
