#!/usr/bin/env python3
"""Checks that moving text between the README and the pages of docs/ lost nothing.

    python3 tools/docs_moved.py REV            # e.g. the commit before a move: HEAD~1

Every sentence of README.md as it was at REV, and every line of its code blocks and tables, must
appear (whitespace aside) in README.md, BENCHMARKS.md or docs/*.md as they are now. Headings are
not checked (a section may be renamed), nor where a link's target is written from. Prints what is missing; exits 1 if anything is.
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def norm(text):
    # A link keeps its target wherever the page is: docs/x and x are the same file from docs/.
    text = re.sub(r"\]\((?:\.\./)?(?:docs/)?", "](", text)
    return re.sub(r"\s+", " ", text).strip()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    old = subprocess.run(["git", "show", f"{sys.argv[1]}:README.md"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    pages = [ROOT / "README.md", ROOT / "BENCHMARKS.md"] + sorted((ROOT / "docs").glob("*.md"))
    texts = [p.read_text() for p in pages]
    joined = norm(" ".join(texts))
    lines = {line.rstrip() for text in texts for line in text.split("\n")}
    checked, missing = 0, []
    for block in re.split(r"(```.*?```)", old, flags=re.S):
        if block.startswith("```"):
            for line in block.split("\n"):
                checked += 1
                if line.rstrip() not in lines:
                    missing.append(line)
            continue
        for para in re.split(r"\n\s*\n", block):
            if para.lstrip().startswith("#"):
                continue
            if para.lstrip().startswith("|"):
                for line in para.split("\n"):
                    checked += 1
                    if line.strip() and line.rstrip() not in lines:
                        missing.append(line)
                continue
            for sentence in re.split(r"(?<=[.:;])\s+(?=[A-Z`(*])", norm(para)):
                if sentence:
                    checked += 1
                    if sentence not in joined:
                        missing.append(sentence)
    print(f"{checked} sentences and lines of README.md at {sys.argv[1]}; {len(missing)} not found now")
    for text in missing:
        print(f"- {text}")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
