"""The package layout: imports say what depends on what, and no module grows past 800 lines.

Every module under generator/ (aesgen, aesgen.bench in generator/bench/), kernels/ and verify/
is parsed with `ast` (nothing is imported). No module uses another's _private names (`from x
import _y`, or `x._y` on a name imported from aesgen): make the name public where it lives, or
move the helper to the module that uses it. No module has a function-local import of aesgen's
own modules (`from aesgen... import`, `from . import`, `importlib.import_module`): it hides a
dependency, usually to dodge an import cycle, and a cycle means a module is in the wrong place.
Lazy imports of third-party packages (matplotlib, the test-vector packages) are fine.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("generator", "kernels", "verify")
MAX_LINES = 800


def modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def own_module(node: ast.Import | ast.ImportFrom) -> str | None:
    """The aesgen module an import statement names, if any (relative imports are aesgen's)."""
    if isinstance(node, ast.ImportFrom):
        if node.level:  # `from . import x` names x
            return "." * node.level + (node.module or ", ".join(a.name for a in node.names))
        names = [node.module or ""]
    else:
        names = [a.name for a in node.names]
    return next((n for n in names if n == "aesgen" or n.startswith("aesgen.")), None)


def dynamic_import(node: ast.Call) -> str | None:
    """`importlib.import_module(...)` (any argument), or `__import__` of an aesgen module."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    arg = node.args[0] if node.args else None
    literal = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
    if name == "import_module":
        return literal or "importlib.import_module(...)"
    if name == "__import__" and literal is not None and (literal == "aesgen" or literal.startswith("aesgen.")):
        return literal
    return None


def hidden_imports(path: Path) -> list[str]:
    """'line: module' for each import of aesgen's own modules inside a function, and each
    dynamic import of one anywhere."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                mod = own_module(child)
                if mod is not None:
                    found.append((child.lineno, mod))
            elif isinstance(child, ast.Call):
                mod = dynamic_import(child)
                if mod is not None:
                    found.append((child.lineno, f"dynamic import of {mod}"))
            visit(child, inside)

    visit(tree, False)
    return [f"{line}: {mod}" for line, mod in sorted(found)]


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path) -> list[str]:
    """'line: module.name' for each _private name imported from another aesgen module, and
    each `x._name` read through a name x that an import of aesgen's own modules binds."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    own = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
           and own_module(node) is not None]
    found = [(node.lineno, f"{own_module(node)}.{a.name}") for node in own if isinstance(node, ast.ImportFrom)
             for a in node.names if private(a.name)]
    bound = {a.asname or a.name.split(".")[0] for node in own for a in node.names}
    found += [(node.lineno, f"{node.value.id}.{node.attr}") for node in ast.walk(tree)
              if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id in bound and private(node.attr)]
    return [f"{line}: {name}" for line, name in sorted(found)]


def package_of(path: Path) -> str:
    """The aesgen package a module file is in (generator/ is aesgen; kernels/, verify/ under it)."""
    parts = path.relative_to(ROOT).parent.parts
    return ".".join(["aesgen", *(parts[1:] if parts[0] == "generator" else parts)])


def tool_imports(path: Path, source: str | None = None) -> list[str]:
    """'line: module' for each import of aesgen.tools (the command line and its tools) in the
    module at path (its text, or source in its place)."""
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source, filename=str(path))
    package = package_of(path).split(".")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])])
            names = [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [f"{node.lineno}: {n}" for n in names if n == "aesgen.tools" or n.startswith("aesgen.tools.")]
    return found


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_packages_are_where_the_layout_says() -> None:
    names = {rel(p) for p in modules()}
    assert {"verify/harness/scene.py", "verify/reference/gcm.py", "generator/bench/timing.py",
            "generator/circuits/netlist.py", "generator/tools/cli.py", "generator/tools/report.py"} <= names
    assert "verify/gf128.py" not in names and "verify/bench.py" not in names
    assert not any(n.startswith("kernels/circuits/") for n in names)  # one circuits package, aesgen.circuits


def test_no_hidden_imports() -> None:
    offenders = {rel(p): hits for p in modules() if (hits := hidden_imports(p))}
    assert offenders == {}, "import aesgen's modules at the top of the module (a cycle means a module " \
                            f"is in the wrong place): {offenders}"


def test_no_private_names_imported_across_modules() -> None:
    offenders = {rel(p): hits for p in modules() if (hits := private_imports(p))}
    assert offenders == {}, f"make the name public where it lives, or move it: {offenders}"


def test_the_compiler_never_imports_its_tools() -> None:
    offenders = {rel(p): hits for p in modules() if not rel(p).startswith("generator/tools/")
                 and (hits := tool_imports(p))}
    assert offenders == {}, f"aesgen.tools (cli, explore, tune...) drives the compiler, not the reverse: {offenders}"


def test_no_module_over_800_lines() -> None:
    long = {rel(p): line_count(p) for p in modules() if line_count(p) > MAX_LINES}
    assert long == {}, f"modules over {MAX_LINES} lines: split them: {long}"


def test_the_checker_sees_what_it_forbids(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("import os\nfrom aesgen import spec\n\n"
                    "def f():\n    import json\n    from aesgen.verify import abi\n    from . import ir\n"
                    "    def g():\n        import aesgen.kernels\n    return importlib.import_module(name)\n\n"
                    "class C:\n    def m(self):\n        from .kernels import gcm\n\n"
                    "h = lambda: __import__('aesgen.dsl')\n", encoding="utf-8")
    assert hidden_imports(path) == ["6: aesgen.verify", "7: .ir", "9: aesgen.kernels",
                                    "10: dynamic import of importlib.import_module(...)", "14: .kernels",
                                    "16: dynamic import of aesgen.dsl"]
    path.write_text("from aesgen import __version__, pipeline\nfrom .gcm import _Stitch, Gcm\nfrom os import _exit\n"
                    "import aesgen.verify.kat as kat\n\nenv = pipeline._env()\nlib = ctypes.CDLL(x)._handle\n"
                    "box = kat._sbox, pipeline.__name__\n", encoding="utf-8")
    assert private_imports(path) == ["2: .gcm._Stitch", "6: pipeline._env", "8: kat._sbox"]


def test_the_tool_check_sees_relative_and_absolute_imports() -> None:
    source = ("from .. import tools\nfrom ..tools.cli import main\nfrom . import tools\nimport aesgen.tools.report\n"
              "from aesgen.tools import explore\nfrom .. import spec\n")
    hits = tool_imports(ROOT / "generator" / "circuits" / "m.py", source)
    assert hits == ["1: aesgen.tools", "2: aesgen.tools.cli.main", "4: aesgen.tools.report",
                    "5: aesgen.tools.explore"]
