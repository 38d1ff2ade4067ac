"""The import contracts of ``pyproject.toml`` excuse nothing and need no list kept up to date.

- No contract has ``ignore_imports``: no import runs against the layers, excused or not.
- No contract names a submodule of ``services.execution`` by hand: an "only X imports Y"
  contract is a ``protected`` one (who may import Y), so a new execution module is covered the
  day it is written. The last test shows it on a package built for the purpose: a module that
  no list names, importing the protected library, breaks the contract as pyproject states it.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp
from importlinter.contracts.protected import ProtectedContract

ROOT = Path(__file__).resolve().parents[2]


def contracts() -> list[dict[str, Any]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found: list[dict[str, Any]] = data["tool"]["importlinter"]["contracts"]
    return found


def test_no_contract_ignores_an_import() -> None:
    ignored = [c["name"] for c in contracts() if c.get("ignore_imports")]
    assert ignored == []


def test_no_contract_lists_execution_submodules() -> None:
    listing = {c["name"]: [m for key in ("source_modules", "allowed_importers")
                           for m in c.get(key, []) if m.startswith("services.execution.")]
               for c in contracts() if c["type"] != "protected"}
    assert {name: mods for name, mods in listing.items() if mods} == {}


def _contract_for(library: str) -> dict[str, Any]:
    (found,) = [c for c in contracts() if library in c.get("protected_modules", [])]
    return found


def test_a_new_execution_module_importing_an_sdk_breaks_its_contract(
        tmp_path: Path) -> None:
    config = _contract_for("openai")
    assert config["type"] == "protected"
    package = tmp_path / "services"
    for folder in ("execution/providers", "execution/brand_new"):
        (package / folder).mkdir(parents=True)
    for init in ("__init__.py", "execution/__init__.py", "execution/providers/__init__.py",
                 "execution/brand_new/__init__.py"):
        (package / init).write_text("")
    (package / "execution/providers/codex.py").write_text("import openai\n")
    (package / "execution/brand_new/helper.py").write_text("import openai\n")
    sys.path.insert(0, str(tmp_path))
    saved = {name: module for name, module in sys.modules.items()
             if name == "services" or name.startswith("services.")}
    for name in saved:
        del sys.modules[name]
    try:
        graph = grimp.build_graph("services", include_external_packages=True, cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == "services" or n.startswith("services.")]:
            del sys.modules[name]
        sys.modules.update(saved)
    contract = ProtectedContract(
        name=config["name"], session_options={},
        contract_options={"protected_modules": config["protected_modules"],
                          "allowed_importers": config["allowed_importers"]})
    check = contract.check(graph, verbose=False)
    assert not check.kept
    links = [link for broken in check.metadata["illegal_imports"]
             for link in broken.illegal_links]
    assert [(link["importer"], link["imported"]) for link in links] == [
        ("services.execution.brand_new.helper", "openai")]
