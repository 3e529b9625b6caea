#!/usr/bin/env python3
"""scripts/check_docs.py must find each kind of drift it claims to: a flag gpt lacks (after a subcommand,
in a usage block's continuation line, after an MPI launcher, alone in prose), a subcommand gpt lacks, a
script flag its script never mentions, a missing script, a missing project file and a broken link; and it
must pass a page whose commands are right. Each case is a small Markdown page written here.

  test_check_docs.py GPT_BINARY
"""
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import check_docs  # noqa: E402

CHECKER = None  # one Checker, so gpt's --help pages are read once for every case


def check(page):
    """(exit code check_docs.py would give, its problem lines) for one Markdown page."""
    CHECKER.problems = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "page.md")
        with open(path, "w") as f:
            f.write(page)
        CHECKER.file(path)
    return (1 if CHECKER.problems else 0), CHECKER.problems


class CheckDocs(unittest.TestCase):
    def assert_one_problem(self, page, *words):
        rc, lines = check(page)
        self.assertEqual(rc, 1, lines)
        self.assertEqual(len(lines), 1, lines)
        for w in words:
            self.assertIn(w, lines[0])

    def test_right_commands_pass(self):
        rc, lines = check("""
```
gpt train --config d2 --steps 3 -B 2 -T 16 \\
  --recompute selective --offload optimizer   # a comment --not-a-flag
gpt memplan --config d12 --world 8
             [--time --hardware FILE]
mpirun -n 2 --oversubscribe build/gpt train --shard full
```
Use `--gather-slots K`, then `gpt eval --model m.bin --val 'x/*.bin'` and `scripts/test.sh`.
See [the README](""" + os.path.join(ROOT, "README.md") + """) and `src/main.cpp`.
""")
        self.assertEqual((rc, lines), (0, []))

    def test_unknown_flag_after_a_subcommand(self):
        self.assert_one_problem("```\ngpt train --config d2 --no-such-flag 3\n```\n", ":2:", "gpt train", "--no-such-flag")

    def test_flag_of_another_subcommand(self):
        # --zero-table is memplan's, not train's
        self.assert_one_problem("`gpt train --zero-table`\n", "gpt train", "--zero-table")

    def test_unknown_flag_in_a_continuation_line(self):
        self.assert_one_problem("```\ngpt memplan --config d2\n             [--time --no-such-flag]\n```\n",
                                ":2:", "gpt memplan", "--no-such-flag")

    def test_unknown_flag_after_a_launcher(self):
        self.assert_one_problem("```\nmpirun -n 4 build/gpt train --shard fulll --shardd full\n```\n", "--shardd")

    def test_unknown_flag_alone_in_prose(self):
        self.assert_one_problem("Add `--recompute-everything` to save memory.\n", "--recompute-everything")

    def test_unknown_subcommand(self):
        self.assert_one_problem("`gpt frobnicate --config d2`\n", "gpt frobnicate", "no such subcommand")

    def test_script_flag_its_script_lacks(self):
        self.assert_one_problem("`scripts/gpu_check.sh --no-such-stage`\n", "scripts/gpu_check.sh", "--no-such-stage")

    def test_missing_script(self):
        self.assert_one_problem("`scripts/no_such_script.sh`\n", "scripts/no_such_script.sh", "no such script")

    def test_missing_project_file(self):
        self.assert_one_problem("The loader is in `src/io/no_such_loader.cpp`.\n", "src/io/no_such_loader.cpp")

    def test_broken_link(self):
        self.assert_one_problem("See [there](no_such_page.md).\n", "no_such_page.md")


if __name__ == "__main__":
    CHECKER = check_docs.Checker(sys.argv.pop(1))
    unittest.main()
