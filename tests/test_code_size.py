"""Issue 43's size limits on the code outside the tests: no Python function over 80 lines, no
Python class over 250 lines, no Rust function over 80 lines outside `#[cfg(test)]`, no C function
(bpf/, apache/) over 80 lines. Fast, no root: Python is read with `ast`, Rust and C by counting
braces (string and character literals and comments left out)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO

MAX_FUNCTION = 80
MAX_CLASS = 250
SKIP = {"tests", ".venv", ".git", "target", "build", "data", "archive", "node_modules"}


def _files(ext: str, under: tuple[str, ...] = ()) -> list[Path]:
    roots = [REPO / u for u in under] if under else [REPO]
    out = []
    for root in roots:
        for path in sorted(root.rglob(f"*.{ext}")):
            if not SKIP & set(path.relative_to(REPO).parts):
                out.append(path)
    return out


def python_too_long(source: str) -> list[str]:
    """'kind name: N lines' for each function over MAX_FUNCTION and class over MAX_CLASS."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines = node.end_lineno - node.lineno + 1
            limit = MAX_CLASS if isinstance(node, ast.ClassDef) else MAX_FUNCTION
            if lines > limit:
                kind = "class" if isinstance(node, ast.ClassDef) else "def"
                found.append(f"{kind} {node.name} (line {node.lineno}): {lines} lines")
    return found


_LITERALS = re.compile(r'r#*"[\s\S]*?"#*|"(?:\\[\s\S]|[^"\\])*"|\'(?:\\[\s\S]|[^\'\\])\'|//[^\n]*|/\*[\s\S]*?\*/')


def _blank_literals(source: str) -> str:
    """The source with every string, character literal and comment replaced by blanks (newlines
    kept, so line numbers stay), so braces inside them are not counted."""
    return _LITERALS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def _block_end(lines: list[str], start: int) -> int:
    """The index of the line closing the block whose first brace is on or after line `start`."""
    depth, opened = 0, False
    for i in range(start, len(lines)):
        for ch in lines[i]:
            if ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:
                    return i
        if not opened and lines[i].rstrip().endswith(";"):
            return i  # a declaration without a body (trait method, extern fn)
    return len(lines) - 1


_RUST_FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+|async\s+|unsafe\s+|extern\s+\S*\s*)*fn\s+(\w+)")
_CFG_TEST = re.compile(r"^\s*#\[cfg\(test\)\]")


def rust_too_long(source: str) -> list[str]:
    """'fn name: N lines' for each Rust function over MAX_FUNCTION, leaving out whatever follows
    `#[cfg(test)]` (a test module or a test-only function)."""
    lines = _blank_literals(source).splitlines()
    found, i = [], 0
    while i < len(lines):
        if _CFG_TEST.match(lines[i]):
            i = _block_end(lines, i + 1) + 1
            continue
        m = _RUST_FN.match(lines[i])
        if m:
            end = _block_end(lines, i)
            if end - i + 1 > MAX_FUNCTION:
                found.append(f"fn {m.group(1)} (line {i + 1}): {end - i + 1} lines")
            # nested functions are measured too: go on inside the body
        i += 1
    return found


_C_FN = re.compile(r"^[A-Za-z_].*\b(\w+)\s*\([^;]*$")


def c_too_long(source: str) -> list[str]:
    """'function name: N lines' for each C function over MAX_FUNCTION: a definition starts at
    column 0 with a name and '(' and its body is the next top-level brace block."""
    lines = _blank_literals(source).splitlines()
    found, i = [], 0
    while i < len(lines):
        m = _C_FN.match(lines[i])
        if m and not re.match(r"^\s*(#|struct\b|enum\b|union\b|typedef\b)", lines[i]) and "=" not in lines[i]:
            end = _block_end(lines, i)
            body = "\n".join(lines[i:end + 1])
            if "{" in body and end - i + 1 > MAX_FUNCTION:
                found.append(f"function {m.group(1)} (line {i + 1}): {end - i + 1} lines")
            i = end + 1
            continue
        i += 1
    return found


def test_python_functions_and_classes():
    bad = [f"{p.relative_to(REPO)}: {what}" for p in _files("py") for what in python_too_long(p.read_text())]
    assert not bad, "over the size limits (issue 43): " + "; ".join(bad)


def test_rust_functions():
    bad = [f"{p.relative_to(REPO)}: {what}" for p in _files("rs", ("engine",)) for what in rust_too_long(p.read_text())]
    assert not bad, "over the size limits (issue 43): " + "; ".join(bad)


def test_c_functions():
    bad = [f"{p.relative_to(REPO)}: {what}" for p in _files("c", ("bpf", "apache"))
           for what in c_too_long(p.read_text())]
    assert not bad, "over the size limits (issue 43): " + "; ".join(bad)


def test_the_checker_sees_what_it_must():
    long_py = "def f():\n" + "    x = 1\n" * 90
    assert python_too_long(long_py) and not python_too_long("def f():\n    return 1\n")
    long_rs = "pub fn f() {\n" + '    let s = "}";\n' * 90 + "}\n"
    assert rust_too_long(long_rs)
    assert not rust_too_long("#[cfg(test)]\nmod tests {\n" + long_rs + "}\n")
    assert not rust_too_long("fn g() { let c = '{'; }\n" + "fn h() {}\n")
    long_c = "static int f(int a)\n{\n" + "\ta++;\n" * 90 + "\treturn a;\n}\n"
    assert c_too_long(long_c) and not c_too_long("int f(void)\n{\n\treturn 0;\n}\n")
