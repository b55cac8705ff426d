#!/usr/bin/env python3
"""The longest C++/CUDA function bodies below a folder (issue 25 item 7: "the longest functions").

A function is a line that ends a signature with `{` (a `)` before it, optionally
`const`, `override`, `noexcept` or a trailing return), not a control statement or
a lambda; its length is the lines from it to the line of its matching brace.
A heuristic for a report, not a parser: it reads braces, skipping // comments
and string literals.

    python3 longest_functions.py src [--most 10]
"""
import argparse
import pathlib
import re

SIGNATURE = re.compile(r"^\s*[\w:<>,~*&\[\] ]+\([^;]*\)\s*(const\s*)?(override\s*)?(noexcept\s*)?(->\s*[\w:<>]+\s*)?\{\s*(//.*)?$")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|else|do|return|case)\b")


def braces(line: str) -> int:
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    line = line.split("//", 1)[0]
    return line.count("{") - line.count("}")


def functions(path: pathlib.Path):
    lines = path.read_text(errors="replace").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        # A signature may span lines: join it with the lines before it that open its parenthesis.
        start = index
        text = line
        while text.count("(") < text.count(")") and start > 0:
            start -= 1
            text = lines[start] + " " + text
        if SIGNATURE.match(text) and not CONTROL.match(text) and "[" not in text.split("(")[0]:
            # A constructor's initialiser list: its signature is on the lines above.
            if text.lstrip().startswith(":"):
                while start > 0 and (lines[start].lstrip().startswith(":") or lines[start - 1].rstrip().endswith((",", ")"))):
                    start -= 1
                text = " ".join(lines[start:index + 1])
            depth, end = 0, index
            for end in range(index, len(lines)):
                depth += braces(lines[end])
                if depth <= 0:
                    break
            name = re.search(r"([\w:~]+)\s*\(", text)
            yield (end - start + 1, f"{path}:{start + 1}", name.group(1) if name else "?")
            index = end + 1
            continue
        index += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--most", type=int, default=10)
    arguments = parser.parse_args()
    found = []
    for path in sorted(pathlib.Path(arguments.folder).rglob("*")):
        if path.suffix in {".cpp", ".hpp", ".cu", ".cuh"}:
            found.extend(functions(path))
    for length, where, name in sorted(found, reverse=True)[: arguments.most]:
        print(f"{length:5d}  {name}  {where}")


if __name__ == "__main__":
    main()
