"""Each page template reads only names its view has (issue 42 item 4): a renamed view field fails here.

Every `render_view(request, "<template>", <view>)` call in webapp/ is found by reading the source
(ast); the view's class is the called class, or the return annotation of the called builder
function, followed through one `view = ...` assignment in the same function. The template's names
are jinja2.meta.find_undeclared_variables over it and the templates it includes or extends, less the
names every page gets (webapp/web/templating.py's context, Jinja's globals) and those it sets itself.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from jinja2 import meta, nodes

from webapp.web.templating import templates

ROOT = Path(__file__).resolve().parents[2]
WEBAPP = ROOT / "webapp"
# names every page's context has (templating._context, the request) beside the view's fields
PAGE_CONTEXT = {"request", "principal", "nav", "nav_current", "csrf_token", "spec", "current_path"}
# names base.html reads only when a view has them (`flash is defined`, `flash_kind|default`)
OPTIONAL = {"flash", "flash_kind"}


def _parsed(name: str) -> nodes.Template:
    env = templates.env
    assert env.loader is not None
    source = env.loader.get_source(env, name)[0]
    return env.parse(source)


def _referenced(tree: nodes.Template) -> Iterator[str]:
    """Yield the templates a template includes, extends or imports (literal names only)."""
    for node in tree.find_all((nodes.Include, nodes.Extends, nodes.Import, nodes.FromImport)):
        if isinstance(node.template, nodes.Const) and isinstance(node.template.value, str):
            yield node.template.value


def _assigned(tree: nodes.Template) -> set[str]:
    """Return the names a template sets anywhere (set, for, macro arguments), which its includes may read."""
    names = {n.name for n in tree.find_all(nodes.Name) if n.ctx in ("store", "param")}
    names |= {m.name for m in tree.find_all(nodes.Macro)}
    for imp in tree.find_all(nodes.FromImport):
        names |= {n if isinstance(n, str) else n[1] for n in imp.names}
    return names


def template_names(name: str) -> set[str]:
    """Return the names a page template reads from its context, its includes and parents included."""
    seen: set[str] = set()
    wanted: set[str] = set()
    assigned: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        tree = _parsed(current)
        wanted |= meta.find_undeclared_variables(tree)
        assigned |= _assigned(tree)
        todo.extend(_referenced(tree))
    return wanted - assigned - set(templates.env.globals) - PAGE_CONTEXT - OPTIONAL


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _callee(func: ast.FunctionDef, expr: ast.expr, depth: int = 0) -> str | None:
    """Return the name of the class or builder that makes the view (`dataclasses.replace` followed to its first argument)."""
    if depth > 3:
        return None
    if isinstance(expr, ast.Name):
        value = _view_expr(func, expr)
        return _param_annotation(func, expr) if value is expr else _callee(func, value, depth + 1)
    if isinstance(expr, ast.Call):
        if ast.unparse(expr.func) in ("replace", "dataclasses.replace"):
            return _callee(func, expr.args[0], depth + 1)
        return ast.unparse(expr.func)
    return None


def _view_expr(func: ast.FunctionDef, expr: ast.expr) -> ast.expr:
    """Follow a plain name to its first assignment in the function (a later one replaces fields of the same view)."""
    if not isinstance(expr, ast.Name):
        return expr
    found: ast.expr = expr
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets):
            return node.value
    return found


def _param_annotation(func: ast.FunctionDef, expr: ast.expr) -> str | None:
    """Return the annotation of the function's parameter `expr` names, if it is one."""
    if isinstance(expr, ast.Name):
        for arg in [*func.args.args, *func.args.kwonlyargs]:
            if arg.arg == expr.id and arg.annotation is not None:
                return ast.unparse(arg.annotation)
    return None


def _view_class(module: object, callee: str) -> type:
    target: object = eval(callee, vars(module))  # noqa: S307 - a dotted name read from our own source
    if isinstance(target, type):
        return target
    hint = typing.get_type_hints(target).get("return")
    # `X | None`: the route answers 404 on None before it renders
    classes = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(classes) == 1:
        hint = classes[0]
    assert isinstance(hint, type), f"{callee}: its return annotation {hint!r} is not a class"
    return hint


def _keys(module: object, expr: ast.expr) -> set[str]:
    """Return the names a `constants` mapping gives: a dict's literal keys, and the keys of the module constants it spreads."""
    if not isinstance(expr, ast.Dict):
        return set(eval(ast.unparse(expr), vars(module)))  # noqa: S307 - a module constant of our own source
    keys: set[str] = set()
    for key, value in zip(expr.keys, expr.values, strict=True):
        if key is None:
            keys |= _keys(module, value)
        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.add(key.value)
    return keys


def page_views() -> Iterator[tuple[str, str, type, set[str]]]:
    """Yield (where, template, view class, constants' names) for every render_view call in webapp/."""
    for path in sorted(WEBAPP.rglob("*.py")):
        text = path.read_text()
        if "render_view(" not in text:
            continue
        tree = ast.parse(text)
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef):
                continue
            for call in ast.walk(func):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "render_view"):
                    continue
                name = call.args[1]
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    continue
                where = f"{path.relative_to(ROOT)}:{call.lineno}"
                callee = _callee(func, call.args[2])
                assert callee is not None, f"{where}: the view is not built by a call this test can follow"
                module = importlib.import_module(_module_name(path))
                constants: set[str] = set()
                for kw in call.keywords:
                    if kw.arg == "constants":
                        constants = _keys(module, _view_expr(func, kw.value))
                yield where, name.value, _view_class(module, callee), constants


PAGES = list(page_views())


def test_every_page_is_found() -> None:
    # the pages that render a view (48 calls when this test was written): a silent parse miss fails here
    assert len(PAGES) >= 45


@pytest.mark.parametrize(("where", "template", "view", "constants"), PAGES, ids=[p[0] for p in PAGES])
def test_template_reads_only_its_views_fields(where: str, template: str, view: type, constants: set[str]) -> None:
    assert dataclasses.is_dataclass(view), f"{where}: {view.__name__} is not a dataclass"
    fields = {f.name for f in dataclasses.fields(view)}
    missing = template_names(template) - fields - constants
    assert not missing, f"{where}: {template} reads {sorted(missing)}, which {view.__name__} has not"
