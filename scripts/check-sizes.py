#!/usr/bin/env python3
"""The size rule of the tree (issue 22): no source file over 800 lines, no function over 120 lines.

Reports, one line per offence and exits 1 when there is any:
  - every source file over the file limit under src/, tests/, fuzz/, bench/, web/src, web/tests and
    python/ (fixtures, data, generated and vendored files left out);
  - every C++ function over the function limit under src/ and tests/, counted from the first line of its
    signature to its closing brace. A brace-matching scan that skips comments, strings, raw strings, char
    literals and preprocessor lines. Namespaces, classes, structs, unions, enums, extern "C" blocks and
    brace initializers are not functions; a lambda counts inside its enclosing function; a test macro
    (TEST, TEST_F, ...) with a body counts as a function;
  - every TS/TSX function under web/src over the function limit: `function name(...) {` declarations and
    `const name = (...) => {` arrows. The dashboard's code is formatted with 2-space indentation, and the
    scan reads a function's extent from it: from its first line to the first `}` at its own indentation.

Usage: scripts/check-sizes.py [--root DIR] [--file-limit N] [--function-limit N] [--all]
  --all   also prints the functions and files that are within the limits but over 80 lines / 600 lines,
          as a note (not an offence).
Stdlib only.
"""

from __future__ import annotations

import argparse
import bisect
import os
import re
import sys
from dataclasses import dataclass

FILE_TREES = ("src", "tests", "fuzz", "bench", "web/src", "web/tests", "python")
CPP_TREES = ("src", "tests")
TS_TREES = ("web/src",)

SOURCE_EXTENSIONS = {
    ".cpp", ".hpp", ".cc", ".h", ".c", ".ipp",
    ".py", ".ts", ".tsx", ".js", ".mjs", ".cjs", ".sh", ".cmake",
}
CPP_EXTENSIONS = {".cpp", ".hpp", ".cc", ".h", ".c", ".ipp"}
TS_EXTENSIONS = {".ts", ".tsx"}

# Folders that hold data, generated output or someone else's code, never the project's source.
SKIPPED_DIRS = {
    "fixtures", "data", "corpus", "generated", "vendor", "vendored", "third_party", "node_modules",
    "__pycache__", ".pytest_cache", "dist", "build", ".venv", "venv", ".git",
}
SKIPPED_FILE_PATTERNS = (re.compile(r"\.min\.js$"), re.compile(r"\.d\.ts$"), re.compile(r"_pb2\.py$"))


@dataclass
class Function:
    name: str
    line: int  # 1-based line of the signature's first line
    end: int  # 1-based line of the closing brace

    @property
    def lines(self) -> int:
        return self.end - self.line + 1


# ---------------------------------------------------------------------------------------------------
# C++


def blank_cpp(text: str) -> str:
    """The text with comments, string and char literals and preprocessor lines replaced by spaces.

    Newlines and the quotes of strings are kept, so offsets and line numbers stay the same and
    `extern "C"` still reads as extern followed by a string.
    """
    out = list(text)
    n = len(text)
    i = 0
    line_start = True  # only whitespace since the last newline

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor line, with its continuations.
            j = i
            while j < n:
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                if text.startswith("/*", j):  # a block comment may run past the line
                    e = text.find("*/", j + 2)
                    j = n if e < 0 else e + 2
                    continue
                j += 1
            blank(i, j)
            i = j
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
            continue
        if c == '"':
            # A raw string: R"delim( ... )delim", with an optional u8/u/U/L prefix before the R.
            m = re.search(r'(?:u8|u|U|L)?R$', text[max(0, i - 3):i])
            prev = text[i - len(m.group(0)) - 1] if m and i - len(m.group(0)) - 1 >= 0 else ""
            if m and not (prev.isalnum() or prev == "_"):
                d = re.match(r'"([^()\\\s]{0,16})\(', text[i:])
                if d:
                    close = ")" + d.group(1) + '"'
                    e = text.find(close, i + len(d.group(0)))
                    e = n if e < 0 else e + len(close)
                    blank(i + 1, e - 1)
                    i = e
                    continue
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
            continue
        if c == "'":
            # A digit separator (1'000'000) when the token before it is a number; a char literal otherwise.
            k = i - 1
            while k >= 0 and (text[k].isalnum() or text[k] in "_.'"):
                k -= 1
            token = text[k + 1:i]
            if token and token[0].isdigit():
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
            continue
        i += 1
    return "".join(out)


CLASS_HEAD = re.compile(r"^(?:template\s*<.*>\s*)?(?:\[\[.*?\]\]\s*)*(?:typedef\s+)?(class|struct|union|enum)\b", re.S)
ACCESS = re.compile(r"^\s*(?:(?:public|private|protected)\s*:(?!:)\s*)+")
TRAILER = re.compile(
    r"^(?:\s*(?:const|volatile|noexcept(?:\s*\(.*\))?|override|final|mutable|try|&&|&|->[^{;]*|requires\b[^{;]*|"
    r"\[\[.*?\]\]))*\s*$",
    re.S,
)
NAME_BEFORE_PARAMS = re.compile(
    r"(operator\s*\(\s*\)|operator\s*(?:\"\"\s*\w+|[^\s\w(][^\s(]*|new\b(?:\s*\[\s*\])?|delete\b(?:\s*\[\s*\])?|"
    r"[A-Za-z_][\w:<>,\s*&]*?)|~?[A-Za-z_]\w*(?:\s*<[^()]*>)?)\s*$"
)
NOT_FUNCTION_WORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof"}


def _top_level_groups(header: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of the top-level parenthesised groups of a declaration."""
    groups = []
    depth = 0
    start = 0
    for k, ch in enumerate(header):
        if ch == "(":
            if depth == 0:
                start = k
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                groups.append((start, k + 1))
            if depth < 0:
                return []
    return groups if depth == 0 else []


def _has_top_level_assignment(header: str) -> bool:
    """An `=` outside parentheses that is not part of an operator's name or a comparison."""
    depth = 0
    for k, ch in enumerate(header):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "=" and depth == 0:
            before = header[:k].rstrip()
            after = header[k + 1:k + 2]
            if re.search(r"operator\s*[-+*/%^&|<>!=]*$", before) or after == "=" or before.endswith(("=", "!", "<", ">")):
                continue
            return True
    return False


def _without_template_head(header: str) -> str:
    """The declaration without its leading `template <...>` (default template arguments have an `=`)."""
    m = re.match(r"^template\s*<", header)
    if not m:
        return header
    depth = 0
    for k in range(m.end() - 1, len(header)):
        if header[k] == "<":
            depth += 1
        elif header[k] == ">":
            depth -= 1
            if depth == 0:
                return _without_template_head(header[k + 1:].lstrip())
    return header


def classify(header: str, original: str) -> tuple[str, str]:
    """What a `{` opens, from the declaration before it: (kind, name).

    kind is "container" (namespace, class, struct, union, extern "C": functions may be inside),
    "function", or "other" (enum bodies, brace initializers, anything that holds no function).
    """
    h = ACCESS.sub("", header)
    skipped = len(header) - len(h)
    h_stripped = h.strip()
    if not h_stripped:
        return "other", ""
    if re.search(r"\bnamespace\b", h_stripped):
        return "container", ""
    if re.match(r'^extern\s*"\s*"\s*$', h_stripped) or re.match(r'^extern\s*"[^"]*"\s*$', h_stripped):
        return "container", ""
    m = CLASS_HEAD.match(h_stripped)
    if m:
        if m.group(1) == "enum":
            return "other", ""
        # `struct X f()`: a function returning an elaborated type is rare; a base list has no parentheses
        # outside template arguments, so a trailing parameter list means a function.
        if not re.search(r"\)\s*(?:const|noexcept|override|final|\s)*$", h_stripped):
            return "container", ""
    if _has_top_level_assignment(_without_template_head(h_stripped)):
        return "other", ""
    groups = _top_level_groups(h)
    if not groups:
        return "other", ""
    # A constructor's initializer list: the parameter list is the group before the first lone ':'
    # that follows a group.
    params = None
    for gs, ge in groups:
        rest = h[ge:]
        if TRAILER.match(rest):
            params = (gs, ge)
            break
        init = re.match(r"^\s*(?:noexcept(?:\s*\([^)]*\))?\s*)?:(?!:)", rest)
        # A constructor's body follows its last initializer, `)` or `}`; after a bare name the brace is
        # that member's initializer.
        if init and h.rstrip().endswith((")", "}")):
            params = (gs, ge)
            break
    if params is None:
        return "other", ""
    before = h[:params[0]]
    nm = NAME_BEFORE_PARAMS.search(before)
    if not nm:
        return "other", ""
    name = re.sub(r"\s+", " ", nm.group(1)).strip()
    # The last word of the name is what a reader looks for: `gf::app::run_place` stays qualified, a
    # return type in front of it does not.
    name = name.split(" ")[-1] if not name.startswith("operator") else name
    if name in NOT_FUNCTION_WORDS or not name:
        return "other", ""
    if re.fullmatch(r"[A-Z][A-Z0-9_]{3,}", name):
        # A macro with a body (TEST, TEST_F, TYPED_TEST, ...): name it with its arguments.
        off = skipped + params[0]
        args = re.sub(r"\s+", " ", original[off:skipped + params[1]])
        name = name + args
    return "function", name


def cpp_functions(text: str) -> list[Function]:
    clean = blank_cpp(text)
    newlines = [k for k, ch in enumerate(clean) if ch == "\n"]

    def line_at(off: int) -> int:
        return bisect.bisect_left(newlines, off) + 1

    functions: list[Function] = []
    n = len(clean)

    def skip_group(i: int) -> int:
        """From a `{` at i, the offset after its matching `}`."""
        depth = 0
        while i < n:
            ch = clean[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return n

    def scan_container(i: int, end_at_brace: bool) -> int:
        """Reads declarations from i; returns the offset after the closing `}` (or n at the top)."""
        start = i  # where the current declaration began
        paren = 0
        while i < n:
            ch = clean[i]
            if ch == "(" or ch == "[":
                paren += 1
            elif ch == ")" or ch == "]":
                paren = max(0, paren - 1)
            elif ch == ";" and paren == 0:
                start = i + 1
            elif ch == "}":
                if end_at_brace:
                    return i + 1
                start = i + 1  # stray brace at the top (unbalanced preprocessor branches): resync
            elif ch == "{":
                if paren > 0:
                    i = skip_group(i)
                    continue
                header = clean[start:i]
                kind, name = classify(header, text[start:i])
                if kind == "container":
                    i = scan_container(i + 1, True)
                    start = i
                    continue
                close = skip_group(i)
                if kind == "function":
                    lead = len(header) - len(ACCESS.sub("", header).lstrip())
                    first = start + lead
                    functions.append(Function(name, line_at(first), line_at(close - 1)))
                    start = close
                # "other": a brace initializer belongs to the declaration that goes on after it.
                i = close
                continue
            i += 1
        return n

    scan_container(0, False)
    return functions


# ---------------------------------------------------------------------------------------------------
# TS / TSX

TS_FUNCTION_START = re.compile(
    r"^(?P<indent>\s*)(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*(?P<name>[A-Za-z_$][\w$]*)?\s*[<(]"
)
TS_ARROW_START = re.compile(
    r"^(?P<indent>\s*)(?:export\s+)?(?:const|let)\s+(?P<name>[A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*(?:async\s+)?"
    r"(?:<[^>]*>\s*)?(?:\(|[A-Za-z_$][\w$]*\s*=>)"
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def ts_functions(text: str) -> list[Function]:
    lines = text.split("\n")
    functions: list[Function] = []
    for idx, line in enumerate(lines):
        m = TS_FUNCTION_START.match(line) or TS_ARROW_START.match(line)
        if not m:
            continue
        is_arrow = m.re is TS_ARROW_START
        col = len(m.group("indent"))
        name = m.group("name") or "default"
        # The signature ends on the first line that ends with `{` outside its parentheses (a destructured
        # parameter or an object type opens braces inside them); lines in between are deeper, except
        # that line itself (`}: Props) {`).
        sig_end = None
        depth = 0
        for k in range(idx, len(lines)):
            stripped = re.sub(r"\s*//.*$", "", lines[k]).rstrip()
            if k > idx and stripped and _indent(lines[k]) <= col and not re.match(r"^\s*[})]", stripped):
                break
            depth += stripped.count("(") - stripped.count(")")
            if depth <= 0 and stripped.endswith("{"):
                if is_arrow and not re.search(r"=>\s*\{$", stripped):
                    break
                if not is_arrow and not re.search(r"\)\s*(?::.*)?\{$", stripped):
                    break
                sig_end = k
                break
        if sig_end is None:
            continue
        end = None
        for k in range(sig_end + 1, len(lines)):
            stripped = lines[k].rstrip()
            if not stripped:
                continue
            if _indent(lines[k]) <= col:
                if _indent(lines[k]) == col and re.match(r"^\s*\}[;),\]]*\s*$", stripped):
                    end = k
                break
        if end is None:
            continue
        functions.append(Function(name, idx + 1, end + 1))
    return functions


# ---------------------------------------------------------------------------------------------------


def source_files(root: str, trees: tuple[str, ...], extensions: set[str]) -> list[str]:
    found = []
    for tree in trees:
        base = os.path.join(root, tree)
        if not os.path.isdir(base):
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith("."))
            for f in sorted(filenames):
                if os.path.splitext(f)[1] not in extensions:
                    continue
                if any(p.search(f) for p in SKIPPED_FILE_PATTERNS):
                    continue
                found.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(set(found))


def read(root: str, rel: str) -> str:
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
        return fh.read()


def count_lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--file-limit", type=int, default=800)
    parser.add_argument("--function-limit", type=int, default=120)
    parser.add_argument("--all", action="store_true", help="also note files over 600 and functions over 80 lines")
    args = parser.parse_args()
    root = args.root

    offences: list[str] = []
    notes: list[str] = []
    for rel in source_files(root, FILE_TREES, SOURCE_EXTENSIONS):
        n = count_lines(read(root, rel))
        if n > args.file_limit:
            offences.append(f"{rel}:1: file is {n} lines (limit {args.file_limit})")
        elif args.all and n > 600:
            notes.append(f"{rel}:1: note: file is {n} lines")

    def check(rel: str, functions: list[Function]) -> None:
        for f in functions:
            if f.lines > args.function_limit:
                offences.append(f"{rel}:{f.line}: function '{f.name}' is {f.lines} lines (limit {args.function_limit})")
            elif args.all and f.lines > 80:
                notes.append(f"{rel}:{f.line}: note: function '{f.name}' is {f.lines} lines")

    for rel in source_files(root, CPP_TREES, CPP_EXTENSIONS):
        check(rel, cpp_functions(read(root, rel)))
    for rel in source_files(root, TS_TREES, TS_EXTENSIONS):
        check(rel, ts_functions(read(root, rel)))

    for line in notes:
        print(line)
    for line in offences:
        print(line)
    return 1 if offences else 0


if __name__ == "__main__":
    sys.exit(main())
