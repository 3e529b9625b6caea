#!/usr/bin/env python3
"""Holds the documentation to the program: every command written in README.md and docs/ must be one that
gpt (and the project's scripts) accept.

Why: the README is an entrance and the deep dives live in docs/; both are full of commands that users
paste. A renamed or removed flag would leave them wrong without any test noticing. This script reads
every fenced code block and every inline code span of the Markdown files and checks:
  - `gpt SUBCOMMAND ...` (also build/gpt, "$gpt"): the subcommand exists and every flag after it appears in
    `gpt SUBCOMMAND --help`;
  - a span that is only flags (`--offload params`): each flag appears in some subcommand's --help, or in
    the source of one of the project's scripts (prose that explains a script's flag);
  - `scripts/NAME ...`: the script exists and every flag after it appears in its source (argparse's
    "--flag", a shell case pattern, ...), a Python script's own modules beside it included;
  - paths to the project's files (src/, tests/, kernels/, scripts/, docs/, data/) and relative Markdown
    links exist.
It prints one line per problem (FILE:LINE: what) and exits 1 if there is any, 0 otherwise.

  scripts/check_docs.py --gpt build/gpt [FILE.md ...]     (default: README.md and docs/**/*.md)
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBCOMMANDS = ["train", "eval", "sample", "tokenize", "bench", "export", "import", "memplan", "plan"]
# Flags the docs name that belong to other programs, or that the docs name as refused syntax. Each is
# written here with the reason, so the list cannot grow silently.
NOT_GPT_FLAGS = {
    "--oversubscribe": "mpiexec's: more ranks than cores",
    "--flag=value": "the syntax gpt's flag parser refuses, named as such",
}
FLAG = re.compile(r"^(--[a-z][a-z0-9-]*|-[A-Za-z])$")
PROJECT_PATH = re.compile(r"^(src|tests|kernels|scripts|docs|data)/[A-Za-z0-9_./+-]*[A-Za-z0-9_]$")
PLACEHOLDER = re.compile(r"(^|/)(X|NAME|FILE|DIR|RUN|N|K)(\.|/|$)|<|\{|\*")


def help_flags(gpt, sub):
    """The flags `gpt sub --help` names, and --help itself."""
    r = subprocess.run([gpt, sub, "--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit(f"check_docs.py: '{gpt} {sub} --help' exited {r.returncode}: {r.stderr.strip()[:200]}")
    return {"--help"} | set(re.findall(r"(?<![A-Za-z0-9-])(--[a-z][a-z0-9-]*|-[A-Za-z])(?![A-Za-z0-9-])", r.stdout))


def script_source(full):
    """A script's text; for Python, with the text of the modules it imports from its own folder."""
    text = open(full, encoding="utf-8").read()
    if full.endswith(".py"):
        for mod in re.findall(r"^\s*(?:import|from)\s+([A-Za-z_][A-Za-z0-9_]*)", text, re.M):
            beside = os.path.join(os.path.dirname(full), mod + ".py")
            if os.path.isfile(beside) and beside != full:
                text += open(beside, encoding="utf-8").read()
    return text


def code_pieces(text):
    """(line number, code) for every fenced block's commands and every inline span, in order."""
    pieces, fence, block, start = [], False, [], 0
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            if fence:
                pieces += join_commands(block, start)
            fence, block, start = not fence, [], n + 1
            continue
        if fence:
            block.append(line)
        else:
            pieces += [(n, m) for m in re.findall(r"`([^`]+)`", line)]
    return pieces


def join_commands(lines, first):
    """A block's lines as commands: a trailing backslash, or a next line that is indented and starts with
    '[' (the usage blocks' optional flags), continues the command."""
    out = []
    for i, line in enumerate(lines):
        code = re.sub(r"(^|\s)#.*$", "", line).rstrip()
        if out and (out[-1][1].endswith("\\") or re.match(r"^\s+\[", line)):
            out[-1] = (out[-1][0], out[-1][1].rstrip("\\") + " " + code.strip())
        elif code.strip():
            out.append((first + i, code))
    return out


def words(code):
    try:
        return shlex.split(code)
    except ValueError:
        return code.split()


def flags_after(tokens):
    """The flags in a command's arguments, up to the end of the command (a pipe, ;, &&, a redirect)."""
    found = []
    for t in tokens:
        if t in ("|", "||", "&&", ";") or t.startswith(">"):
            break
        for part in re.split(r"[\[\]|]", t):
            if FLAG.match(part):
                found.append(part)
    return found


def is_gpt(word):
    return os.path.basename(word) in ("gpt", "gpt_simt") or word in ("$gpt", "${gpt}")


class Checker:
    def __init__(self, gpt):
        self.flags = {sub: help_flags(gpt, sub) for sub in SUBCOMMANDS}
        self.any_flag = set().union(*self.flags.values())
        self.problems = []
        self.script_flags = set()  # every flag named in the source of a script under scripts/
        for f in glob.glob(os.path.join(ROOT, "scripts", "**", "*"), recursive=True):
            if re.search(r"\.(py|sh|mjs)$", f):
                self.script_flags |= set(re.findall(r"--[a-z][a-z0-9-]*", script_source(f)))
        self.prose_flags = []  # (where, flag): flags standing alone, checked at the end of their file

    def say(self, where, what):
        self.problems.append(f"{where}: {what}")

    def command(self, where, tokens):
        """Checks each gpt and scripts/ command in the tokens; True if the piece was a command."""
        seen = False
        for i, t in enumerate(tokens):
            if is_gpt(t) and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                sub, seen = tokens[i + 1], True
                if sub.isupper():
                    continue  # a placeholder: "gpt SUBCOMMAND --help"
                if sub not in self.flags:
                    self.say(where, f"'gpt {sub}': no such subcommand (gpt has {' '.join(SUBCOMMANDS)})")
                    continue
                for f in flags_after(tokens[i + 2:]):
                    if f not in self.flags[sub] and f not in NOT_GPT_FLAGS:
                        self.say(where, f"'gpt {sub} {f}': gpt {sub} --help has no {f}")
            elif re.match(r"^(\./)?scripts/[A-Za-z0-9_/.-]+\.(sh|py|mjs)$", t):
                seen = True
                self.script(where, t.lstrip("./") if t.startswith("./") else t, tokens[i + 1:])
        return seen

    def script(self, where, path, rest):
        full = os.path.join(ROOT, path)
        if not os.path.isfile(full):
            self.say(where, f"{path}: no such script")
            return
        source = script_source(full)
        for f in flags_after(rest):
            if is_gpt(f):
                break
            if f not in source:
                self.say(where, f"'{path} {f}': {path} never mentions {f}")

    def piece(self, where, code):
        tokens = words(code)
        if not tokens:
            return
        if self.command(where, tokens):
            return
        if all(FLAG.match(t) or not t.startswith("-") for t in tokens) and FLAG.match(tokens[0]):
            self.prose_flags += [(where, f) for f in flags_after(tokens)]
            return
        for t in tokens:
            self.path(where, t.rstrip(".,:;)"))

    def path(self, where, t):
        if PROJECT_PATH.match(t) and not PLACEHOLDER.search(t):
            if not os.path.exists(os.path.join(ROOT, t)):
                self.say(where, f"{t}: no such file or folder in the project")

    def links(self, name, text):
        for n, line in enumerate(text.split("\n"), 1):
            for target in re.findall(r"\]\(([^)#\s]+)[^)]*\)", line):
                if re.match(r"^[a-z]+:", target):
                    continue  # a web address
                if not os.path.exists(os.path.join(os.path.dirname(name), target)):
                    self.say(f"{os.path.relpath(name, ROOT)}:{n}", f"link to {target}: no such file")

    def file(self, name):
        text = open(name, encoding="utf-8").read()
        rel = os.path.relpath(name, ROOT)
        self.prose_flags = []
        for n, code in code_pieces(text):
            self.piece(f"{rel}:{n}", code)
        for where, f in self.prose_flags:
            if f not in self.any_flag and f not in self.script_flags and f not in NOT_GPT_FLAGS:
                self.say(where, f"'{f}': neither a gpt subcommand's --help nor a script under scripts/ has it")
        self.links(name, text)


def main():
    ap = argparse.ArgumentParser(description="Check that the commands in the docs are ones gpt accepts.")
    ap.add_argument("--gpt", required=True, help="the gpt binary to ask for --help")
    ap.add_argument("files", nargs="*", help="Markdown files (default: README.md and docs/**/*.md)")
    a = ap.parse_args()
    if not os.access(a.gpt, os.X_OK):
        sys.exit(f"check_docs.py: --gpt {a.gpt}: not an executable file")
    files = a.files or [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    c = Checker(a.gpt)
    for f in files:
        c.file(os.path.abspath(f))
    for p in c.problems:
        print(p)
    print(f"check_docs.py: {len(files)} files, {len(c.problems)} problems")
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main())
