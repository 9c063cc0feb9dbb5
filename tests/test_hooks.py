"""Hooks (webapp/core/hooks.py): a lower domain asks, the domain above answers, found by name.

Every hook a domain declares in its `hooks.py` is answered exactly once by a `provides.py`, each
answer names a declared hook, and a call reaches the answer; an unanswered or twice-answered hook
fails naming it.
"""

from __future__ import annotations

import inspect

import pytest

from webapp.core import hooks
from webapp.core.domains import domain_modules
from webapp.core.hooks import Answer, Hook, HookError, collect, hook


def declared_hooks() -> dict[str, Hook[..., object]]:
    """Return every hook declared in a domain's hooks.py, by name."""
    return {
        h.name: h
        for module in domain_modules("hooks")
        for h in vars(module).values()
        if isinstance(h, Hook)
    }


class TestTheAppsHooks:
    def test_every_declared_hook_is_answered_and_every_answer_declared(self) -> None:
        declared = declared_hooks()
        assert len(declared) >= 8  # runs 2, checks 2, grading 1, regression 1, metrics 2 (a hook declared elsewhere would fall out)
        assert sorted(hooks.answers()) == sorted(declared)

    def test_an_answer_takes_the_declared_parameters(self) -> None:
        """An answer's parameters have the hook's names, kinds and defaults (pyright checks their types)."""
        declared = declared_hooks()
        for name, answer in hooks.answers().items():
            wanted = inspect.signature(declared[name].declared).parameters
            got = inspect.signature(answer).parameters
            assert [(p.name, p.kind, p.default) for p in got.values()] == [
                (p.name, p.kind, p.default) for p in wanted.values()
            ], name

    def test_a_call_reaches_the_answer(self) -> None:
        from webapp.evaluator.provides import JUDGE
        from webapp.grading.hooks import judge_lookup

        assert judge_lookup() is JUDGE


@hook
def _asked(*, n: int) -> int:
    """A hook of this test, answered by nobody."""
    ...


class TestTheMechanism:
    def test_the_name_is_the_declaring_module_and_function(self) -> None:
        assert _asked.name == "tests.test_hooks._asked"
        assert _asked.__doc__ == "A hook of this test, answered by nobody."

    def test_an_unanswered_hook_fails_naming_it(self) -> None:
        with pytest.raises(HookError, match=r"no domain answers the hook tests\.test_hooks\._asked"):
            _asked(n=1)

    def test_a_hook_answered_twice_fails_naming_it(self) -> None:
        with pytest.raises(HookError, match=r"hook tests\.test_hooks\._asked is answered twice"):
            collect([_asked.by(lambda *, n: n), _asked.by(lambda *, n: n + 1)])

    def test_collect_keeps_each_answer(self) -> None:
        found = collect([_asked.by(lambda *, n: n * 2)])
        assert list(found) == ["tests.test_hooks._asked"] and found["tests.test_hooks._asked"](n=21) == 42
        assert isinstance(_asked.by(lambda *, n: n), Answer)
