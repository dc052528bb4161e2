"""The declared public API: every module has ``__all__``, every name in it imports, and the API
reference site (mkdocs + mkdocstrings, docs/api/) renders every module and every such name."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "councilzoo"
API_PAGES = ROOT / "docs" / "api"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(module_name(p) for p in PACKAGE.rglob("*.py"))


def declared(module: str) -> list[str] | None:
    """The module's ``__all__`` as written (None when it declares none), read without importing it."""
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    if not path.is_file():
        path = path.with_suffix("") / "__init__.py"
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return None


def rendered_modules() -> list[str]:
    """The modules the API pages render, one ``::: module`` line each."""
    pages = sorted(API_PAGES.glob("*.md"))
    return [m for page in pages for m in re.findall(r"^::: (\S+)$", page.read_text(), re.M)]


def test_every_module_declares_all():
    missing = [m for m in MODULES if declared(m) is None]
    assert missing == [], f"modules without __all__: {missing}"


@pytest.mark.parametrize("module", MODULES)
def test_every_declared_name_imports(module):
    imported = importlib.import_module(module)
    for name in imported.__all__:
        assert hasattr(imported, name), f"{module}.__all__ names {name!r}, which it does not define"


def test_the_api_reference_renders_every_module_once():
    rendered = rendered_modules()
    repeated = sorted({m for m in rendered if rendered.count(m) > 1})
    missing, unknown = sorted(set(MODULES) - set(rendered)), sorted(set(rendered) - set(MODULES))
    assert sorted(rendered) == MODULES, f"docs/api/ misses {missing}, unknown {unknown}, repeats {repeated}"


def inventory(site: Path) -> set[str]:
    """Every object the built site documents (its Sphinx-format objects.inv)."""
    *header, body = site.joinpath("objects.inv").read_bytes().split(b"\n", 4)
    assert header[0] == b"# Sphinx inventory version 2"
    return {line.split()[0] for line in zlib.decompress(body).decode().splitlines() if line.strip()}


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """``mkdocs build --strict`` of the whole site (a broken link or reference fails it)."""
    pytest.importorskip("mkdocstrings", reason="the docs extra: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_every_declared_name_is_in_the_api_reference(site):
    documented = inventory(site)
    exported = {(m, n): getattr(importlib.import_module(m), n) for m in MODULES for n in declared(m)}
    missing = []
    for (module, name), obj in exported.items():
        # a re-exported name is documented where it is defined (the same object, in another module)
        homes = {f"{m}.{n}" for (m, n), other in exported.items() if n == name and other is obj}
        homes.add(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}")
        if not homes & documented:
            missing.append(f"{module}.{name}")
    assert missing == [], f"not in the API reference: {missing}"
