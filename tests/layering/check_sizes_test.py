#!/usr/bin/env python3
"""The size checker (scripts/check-sizes.py) against a planted tree: it reports exactly the planted
offences, and nothing that only looks like one (braces in strings, raw strings, comments and char
literals, initializer lists, classes, fixtures). Stdlib only; exits non-zero with a diff on failure."""

import os
import subprocess
import sys
import tempfile

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check-sizes.py")


def body(n: int) -> str:
    """n lines of statements."""
    return "".join(f"  x += {i};\n" for i in range(n))


def plant(root: str) -> None:
    def write(rel: str, text: str) -> None:
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    # 121 lines from signature to brace: one offence; 120: none.
    write("src/a/long.cpp",
          "namespace gf::a {\nnamespace {\n"  # lines 1-2
          "int too_long(int x) {\n" + body(119) + "}\n"  # lines 3-123: 121 lines
          "int just_fits(int x) {\n" + body(118) + "}\n"  # 120 lines
          "}  // namespace\n}  // namespace gf::a\n")
    # Braces in comments, strings, raw strings and char literals do not open anything; a class with an
    # inline member function, an initializer list and an enum are not functions; the member function is.
    write("src/a/tricky.hpp",
          "#pragma once\n"  # 1
          "// { a comment brace\n"  # 2
          "/* { */\n"  # 3
          "#define OPEN {\n"  # 4
          "struct S : Base {\n"  # 5
          "  S(int v) : v_(v), w_{v} {\n"  # 6
          + body(120) +  # 7-126
          "  }\n"  # 127: 122 lines from 6
          "  std::function<void()> cb_{};\n"
          "  int v_, w_;\n"
          "};\n"
          "enum class E : int { A, B };\n"
          "constexpr int kTable[] = {1, 2, 3};\n"
          "inline const char* text() { return R\"x( { )x\" \"{\"; }\n"
          "inline char brace() { return '{'; }\n"
          "inline int digits() { return 1'000'000; }\n"
          "template <class F = void (*)(int&)>\n"
          "int with_default(int k, F f = [](int&) {}) {\n"
          + body(121) +
          "}\n")
    # A test macro with a body counts, named with its arguments.
    write("tests/unit/a/a_test.cpp", "TEST(Area, Long) {\n" + body(125) + "}\n")
    # A file over 800 lines; fixtures are data, never checked.
    write("python/big.py", "x = 1\n" * 801)
    write("tests/fixtures/huge.cpp", "int f() {\n" + body(900) + "}\n")
    # TS: a declaration with a destructured parameter and an object return type, and an arrow.
    write("web/src/view.tsx",
          "export function View({\n  a,\n}: { a: number }): { b: string } {\n" + body(120) + "}\n"
          "\n"
          "const short = (n: number) => {\n  return n;\n};\n"
          "export const Long = async (n: number) => {\n" + body(121) + "};\n")


EXPECTED = [
    "python/big.py:1: file is 801 lines (limit 800)",
    "src/a/long.cpp:3: function 'too_long' is 121 lines (limit 120)",
    "src/a/tricky.hpp:6: function 'S' is 122 lines (limit 120)",
    "src/a/tricky.hpp:136: function 'with_default' is 124 lines (limit 120)",
    "tests/unit/a/a_test.cpp:1: function 'TEST(Area, Long)' is 127 lines (limit 120)",
    "web/src/view.tsx:1: function 'View' is 124 lines (limit 120)",
    "web/src/view.tsx:129: function 'Long' is 123 lines (limit 120)",
]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gf-sizes-") as root:
        plant(root)
        run = subprocess.run([sys.executable, CHECKER, "--root", root], capture_output=True, text=True)
        got = sorted(line for line in run.stdout.splitlines() if line)
        ok = run.returncode == 1 and got == sorted(EXPECTED)
        # A clean tree passes.
        clean = os.path.join(root, "clean")
        os.makedirs(os.path.join(clean, "src"))
        with open(os.path.join(clean, "src", "ok.cpp"), "w", encoding="utf-8") as f:
            f.write("int f(int x) {\n" + body(10) + "  return x;\n}\n")
        clean_run = subprocess.run([sys.executable, CHECKER, "--root", clean], capture_output=True, text=True)
        ok = ok and clean_run.returncode == 0 and clean_run.stdout == ""
    if not ok:
        print("expected (exit 1):\n  " + "\n  ".join(sorted(EXPECTED)))
        print(f"got (exit {run.returncode}):\n  " + "\n  ".join(got))
        print(f"clean tree: exit {clean_run.returncode}, output {clean_run.stdout!r}")
        if run.stderr:
            print(run.stderr)
        return 1
    print("check-sizes: the planted offences and nothing else")
    return 0


if __name__ == "__main__":
    sys.exit(main())
