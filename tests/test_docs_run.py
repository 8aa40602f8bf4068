"""The documentation's code blocks: each says what it is, and each that claims to run does (the
`python test` blocks run in tests/test_installed.py, in a user's project, against the installed package).
The runner is tests/docblocks.py; docs/contributing.md says how to mark a block."""

import os
import sys
from pathlib import Path

import pytest

from docblocks import (PAGES, REPO, Block, blocks, check_fragment, clean_copy, problems_marking, run_program,
                       run_python, run_shell, run_tests)

ALL = [b for page in PAGES for b in blocks(page)]


def executed(*modes: str, language: str | None = None) -> list:
    return [pytest.param(b, id=b.where) for b in ALL if b.mode in modes and language in (None, b.language)]


@pytest.fixture(scope="module")
def repository_copy(tmp_path_factory):
    """A copy of the repository as a fresh clone has it, with this checkout's virtualenv."""
    copy = clean_copy(tmp_path_factory.mktemp("docs") / "repo")
    (copy / ".venv").symlink_to(REPO / ".venv")
    return copy


def test_every_block_says_what_it_is():
    assert len(ALL) > 40
    assert [problem for block in ALL for problem in problems_marking(block)] == []


def test_the_docs_run_their_claims():
    """README's platform program, the runtimes, the regenerate commands: the blocks that claim to run."""
    assert {(b.page.name, b.mode) for b in ALL if b.mode in ("run", "program", "test")} >= {
        ("README.md", "program"), ("components.md", "run"), ("contributing.md", "run"), ("languages.md", "run"),
        ("testing.md", "test"), ("runs.md", "test"), ("components.md", "test")}


@pytest.mark.parametrize("block", executed("run", language="python"))
def test_python_block_runs(block, tmp_path):
    done = run_python(block, sys.executable, tmp_path)
    assert done.returncode == 0, f"{block.where}:\n{done.stderr[-4000:]}"


@pytest.mark.parametrize("block", executed("program"))
def test_program_block_runs_and_exports_what_the_page_says(block, tmp_path):
    done = run_program(block, sys.executable, tmp_path)
    assert done.returncode == 0, f"{block.where}:\n{done.stderr[-4000:]}"


@pytest.mark.parametrize("block", executed("run", language="sh"))
def test_shell_block_runs_and_changes_nothing(block, repository_copy):
    done = run_shell(block, repository_copy)
    assert done.returncode == 0, f"{block.where}:\n{done.stderr[-4000:]}"


@pytest.mark.parametrize("block", [pytest.param(b, id=b.where) for b in ALL
                                   if b.mode == "fragment" and "of" in b.options])
def test_fragment_is_part_of_the_file_it_names(block):
    check_fragment(block)


# --- the runner fails when a block stops working ---------------------------------------------------------

def page(tmp_path: Path, text: str) -> list[Block]:
    path = tmp_path / "page.md"
    path.write_text(text)
    return blocks(path)


def test_a_block_that_does_not_say_what_it_is_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr("docblocks.REPO", tmp_path)
    [bare, unknown, good] = page(tmp_path, "```python\nx = 1\n```\n\n```sh runs\nls\n```\n\n```sh manual\nls\n```\n")
    assert problems_marking(bare) == ["page.md:1: ```python ``` does not say what it is; write ```<language> "
                                      "<run|test|program|output|figure|synopsis|fragment|manual>``` "
                                      "(docs/contributing.md)"]
    assert len(problems_marking(unknown)) == 1 and problems_marking(good) == []


def test_a_broken_python_block_fails(tmp_path):
    [good, broken] = page(tmp_path, "```python run\nfrom trainjobs import PodTemplate\nPodTemplate(image='a:1')\n```\n"
                                    "```python run\nfrom trainjobs import PodTemplate\nPodTemplate(imag='a:1')\n```\n")
    assert run_python(good, sys.executable, tmp_path).returncode == 0
    done = run_python(broken, sys.executable, tmp_path)
    assert done.returncode != 0 and 'unknown argument "imag"; did you mean "image"?' in done.stderr


def test_a_program_that_fails_or_exports_otherwise_fails(tmp_path):
    program = ("import pulumi\nfrom trainjobs import TorchTrainJob\n"
               "job = TorchTrainJob('a', {'image': 'x:1', 'num_nodes': NODES})\n"
               "pulumi.export('master_addr', job.master_addr)\n")
    text = ('<!-- docs-test {"outputs": {"master_addr": "a-node-0-0.a"}} -->\n```python program\n'
            + program.replace("NODES", "2") + "```\n\n"
            '<!-- docs-test {"outputs": {"master_addr": "b-node-0-0.b"}} -->\n```python program\n'
            + program.replace("NODES", "2") + "```\n\n```python program\n" + program.replace("NODES", "0") + "```\n")
    good, wrong_export, refused = page(tmp_path, text)
    for block, code in ((good, 0), (wrong_export, 1)):
        (tmp_path / block.where.replace(":", "-")).mkdir()
        assert run_program(block, sys.executable, tmp_path / block.where.replace(":", "-")).returncode == code
    (tmp_path / "refused").mkdir()
    done = run_program(refused, sys.executable, tmp_path / "refused")
    assert done.returncode != 0 and "num_nodes" in done.stderr


def test_a_failing_or_missing_documented_test_fails(tmp_path):
    passing, failing = page(tmp_path, "```python test\ndef test_a():\n    assert 1 + 1 == 2\n```\n"
                                      "```python test\ndef test_b():\n    assert 1 + 1 == 3\n```\n")
    assert run_tests([passing], sys.executable, tmp_path).returncode == 0
    assert run_tests([passing, failing], sys.executable, tmp_path).returncode != 0
    # A test the runner did not collect (here: shadowed by a second definition) is a failure too.
    [twice] = page(tmp_path, "```python test\ndef test_a():\n    pass\ndef test_a():\n    pass\n```\n")
    done = run_tests([twice], sys.executable, tmp_path)
    assert done.returncode == 1 and done.stderr == "expected 2 passed tests"


def test_a_shell_block_that_fails_or_changes_the_repository_fails(tmp_path):
    copy = tmp_path / "copy"
    (copy / "docs").mkdir(parents=True)
    (copy / "docs" / "a.md").write_text("a\n")
    ok, failing, changing = page(tmp_path, "```sh run\ncat docs/a.md\n```\n```sh run\nfalse\n```\n"
                                           "```sh run\necho b > docs/a.md\n```\n")
    assert run_shell(ok, copy).returncode == 0
    assert run_shell(failing, copy).returncode != 0
    done = run_shell(changing, copy)
    assert done.returncode == 1 and done.stderr == "the commands changed ['docs/a.md']"


def test_a_fragment_that_is_not_in_its_file_fails(tmp_path, monkeypatch):
    monkeypatch.setattr("docblocks.REPO", tmp_path)
    (tmp_path / "f.yaml").write_text("a: {b: 1, c: [x, y]}\n")
    inside, outside = page(tmp_path, "```yaml fragment of=f.yaml\na: {c: [y]}\n```\n"
                                     "```yaml fragment of=f.yaml\na: {b: 2}\n```\n")
    check_fragment(inside)
    with pytest.raises(AssertionError, match="not part of f.yaml"):
        check_fragment(outside)
