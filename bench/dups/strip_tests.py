#!/usr/bin/env python3
"""Blank every `#[cfg(test)]` module in the Rust files below a folder, in place.

Used by count.sh on a throw-away copy of `crates/`. A module's lines become empty lines,
so the line numbers `duplicates` reports still point into the real files.

The scan understands just enough Rust to find the module's closing brace: line and block
comments, string literals (plain, byte, raw with any number of `#`) and char literals
(told apart from lifetimes), so a `"{"` inside a test does not end the module early.
"""
import os
import re
import sys

ATTR = re.compile(r"^\s*#\[cfg\(test\)\]\s*$")
# The item an attribute stands on: a module with a body (`mod tests;` lives in a tests.rs
# that count.sh deletes, and blanking the one line changes nothing the tool sees).
MOD = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def block_end(text, start):
    """Offset just past the brace that closes the first `{` at or after `start`."""
    depth = 0
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                return n
            continue
        if c == "/" and text.startswith("/*", i):
            nest = 0
            while i < n:
                if text.startswith("/*", i):
                    nest += 1
                    i += 2
                elif text.startswith("*/", i):
                    nest -= 1
                    i += 2
                    if nest == 0:
                        break
                else:
                    i += 1
            continue
        raw = re.match(r'b?r(#*)"', text[i : i + 260])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + raw.group(1)
            j = text.find(close, i + raw.end())
            i = n if j < 0 else j + len(close)
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == "'":
            ch = re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", text[i : i + 14])
            if ch:
                i += ch.end()
                continue
            i += 1  # a lifetime or a label
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def strip(path):
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    lines = text.split("\n")
    offsets = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    blank = set()
    k = 0
    while k < len(lines):
        if ATTR.match(lines[k]):
            # the item may carry more attributes (`#[allow(...)]`) between the two
            j = k + 1
            while j < len(lines) and lines[j].lstrip().startswith("#["):
                j += 1
            if j < len(lines) and MOD.match(lines[j]):
                end = block_end(text, offsets[j])
                last = text.count("\n", 0, end - 1)
                blank.update(range(k, last + 1))
                k = last + 1
                continue
        k += 1
    if blank:
        out = "\n".join("" if i in blank else l for i, l in enumerate(lines))
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(out)
    return len(blank)


def main(root):
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.endswith(".rs"):
                total += strip(os.path.join(dirpath, name))
    print(f"blanked {total} lines of #[cfg(test)] modules", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
