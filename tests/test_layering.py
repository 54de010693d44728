"""Import direction (docs/design.md §2), read from the source of every module: no import runs.

Imports inside functions count too, so a lazy import cannot slip past the layering.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("verl", "ray", "torch")


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name `path` imports, at any depth of its syntax tree."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import; the layering test reads absolute ones"
            names.add(node.module or "")
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules_under(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def violations(paths: list[Path], forbidden) -> list[str]:
    return [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in paths
        for name in sorted(imported_modules(path))
        if forbidden(path, name)
    ]


def test_the_walk_sees_lazy_imports_and_every_package(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from ray.util import x\n    import torch.nn\n")
    assert {"os", "ray.util", "ray.util.x", "torch.nn"} <= imported_modules(module)
    packages = {path.parent.name for path in modules_under("seal")}
    assert {"bfcl", "protocol", "env", "tocf", "evaluation"} <= packages


def test_bfcl_imports_nothing_else_of_the_project():
    found = violations(
        modules_under("seal/bfcl"),
        lambda _, name: (
            (within(name, "seal") and not within(name, "seal.bfcl")) or within(name, "env_service")
        ),
    )
    assert found == []


def test_tocf_reads_only_the_verifier_record_from_below():
    found = violations(
        modules_under("seal/tocf"),
        lambda _, name: (
            within(name, "seal") and not within(name, "seal.tocf") and not within(name, "seal.bfcl.checks")
        ),
    )
    assert found == []


def test_only_the_cli_imports_the_service_and_only_its_app():
    cli = ROOT / "seal" / "cli.py"
    others = [path for path in modules_under("seal") if path != cli]
    assert violations(others, lambda _, name: within(name, "env_service")) == []
    from_cli = {name for name in imported_modules(cli) if within(name, "env_service")}
    assert from_cli and all(within(name, "env_service.app") for name in from_cli), from_cli


def test_service_routes_call_seal_env_only():
    """`seal.flags` only declares the settings' flags; every call the routes make goes to seal.env."""
    found = violations(
        [ROOT / "env_service" / "app.py"],
        lambda _, name: (
            within(name, "seal") and not within(name, "seal.env") and not within(name, "seal.flags")
        ),
    )
    assert found == []


@pytest.mark.parametrize("heavy", HEAVY)
def test_nothing_below_the_trainer_imports_the_training_stack(heavy: str):
    trainer = ROOT / "seal" / "trainer"
    below = [path for path in modules_under("seal") if trainer not in path.parents]
    below += modules_under("env_service")
    assert violations(below, lambda _, name: within(name, heavy)) == []


def import_graph(paths: list[Path], root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules among `paths` it imports (`from m import name` counts as importing m)."""
    modules = {".".join(path.relative_to(root).with_suffix("").parts): path for path in paths}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_modules(path):
            parts = imported.split(".")
            prefixes = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
            target = next((prefix for prefix in prefixes if prefix in modules), None)
            if target is not None and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` as [a, b, ..., a], or [] when the arrows all run one way."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        for target in sorted(graph[module]):
            cycle = visit(target, [*path, module])
            if cycle:
                return cycle
        done.add(module)
        return []

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle:
            return cycle
    return []


def test_the_cycle_finder_sees_a_circle_through_a_lazy_import(tmp_path: Path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "top.py").write_text("from pkg.middle import run\n")
    (package / "middle.py").write_text("import os\n\ndef run():\n    from pkg.bottom import f\n")
    (package / "bottom.py").write_text("def f():\n    from pkg.top import x\n")
    graph = import_graph(sorted(package.glob("*.py")), root=tmp_path)
    assert import_cycle(graph) == ["pkg.bottom", "pkg.top", "pkg.middle", "pkg.bottom"]
    graph["pkg.bottom"] = set()
    assert import_cycle(graph) == []


def test_the_trainer_package_has_no_import_cycle():
    """The arrows run one way: launcher -> test_protocol -> experiment -> task_runner -> trainer ->
    val_test (scoring), never back up (docs/design.md §2)."""
    assert import_cycle(import_graph(modules_under("seal/trainer"))) == []


def test_the_smoke_model_builder_needs_no_training_stack():
    """`make_smoke_model.py` runs on a GPU node before verl and Ray are installed there."""
    script = ROOT / "scripts" / "make_smoke_model.py"
    from_seal = {name for name in imported_modules(script) if within(name, "seal")}
    allowed = ("seal.trainer.chatml", "seal.backbones")
    assert from_seal and all(any(within(name, a) for a in allowed) for name in from_seal), from_seal
    needed = [ROOT / "seal" / "trainer" / "chatml.py", *modules_under("seal/backbones")]
    assert violations(needed, lambda _, name: within(name, "verl") or within(name, "ray")) == []
