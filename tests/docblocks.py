"""The code blocks of the documentation, and the runner that executes those that claim to run.

Every fenced block in README.md, docs/ and policy/README.md says in its info string what it is
(docs/contributing.md, "Code blocks in the docs"): ```` ```python run ````, ```` ```sh manual ````, ...

Executed:
  run      Python: run as a script with the given interpreter, in a scratch directory.
           sh: run by bash, in a copy of the repository with its virtualenv (`.venv`), and must leave
           the copy's tracked files as they are (a regenerate command finds nothing to change).
  test     Python: pytest tests. A page's test blocks together are one test module; every test in
           it must pass (tests/test_installed.py runs them in a user's project, from the wheel).
  program  Python: a Pulumi program, run under the test kit's mocks (`trainjobs.testing.run_program`)
           as `__main__.py` of a scratch project. An HTML comment right before the block may give it
           JSON: {"config": ..., "stack_outputs": ..., "outputs": ...}; `outputs` are the stack outputs
           the program must export.
Not executed, and saying so:
  output   what a command prints
  figure   a picture in text
  synopsis a command's usage, with placeholders
  fragment part of a program or file; `of=PATH` names the repository file whose lines it repeats, in order
  manual   commands a reader runs that the suite cannot or covers elsewhere (a cluster, the Pulumi CLI,
           root, or the test suite itself)
"""

import json
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", REPO / "policy" / "README.md", *(REPO / "docs").glob("*.md")])
EXECUTED = {"python": ("run", "test", "program"), "sh": ("run",)}
NOT_EXECUTED = ("output", "figure", "synopsis", "fragment", "manual")
# Bounds for a block that hangs, not for a slow machine.
BLOCK_SECONDS = 600

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
_SETTINGS = re.compile(r"<!--\s*docs-test\s+(.*?)\s*-->", re.S)


@dataclass
class Block:
    page: Path
    line: int
    language: str
    mode: str | None
    options: dict[str, str]
    code: str
    settings: dict = field(default_factory=dict)   # from a `<!-- docs-test {...} -->` comment before it

    @property
    def where(self) -> str:
        shown = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page.name
        return f"{shown}:{self.line}"


def clean_copy(destination: Path) -> Path:
    """The repository's files as a fresh clone would have them, with uncommitted edits, without
    virtualenvs, caches or build output."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, destination / name)
    return destination


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """The fenced blocks of a page, in order."""
    text = page.read_text() if text is None else text
    found = []
    for match in _FENCE.finditer(text):
        words = match.group(1).split()
        language = words[0] if words else ""
        mode = words[1] if len(words) > 1 else None
        options = dict(word.split("=", 1) for word in words[2:] if "=" in word)
        preceding = text[:match.start()].rstrip()
        comment = _SETTINGS.fullmatch(preceding[preceding.rfind("<!--"):]) if preceding.endswith("-->") else None
        settings = json.loads(comment.group(1)) if comment else {}
        found.append(Block(page, text.count("\n", 0, match.start()) + 1, language, mode, options,
                           match.group(2), settings))
    return found


def problems_marking(block: Block) -> list[str]:
    """Why a block's info string does not say what it is, or nothing."""
    if block.mode in NOT_EXECUTED:
        return []
    if block.mode in EXECUTED.get(block.language, ()):
        return []
    allowed = [*EXECUTED.get(block.language, ()), *NOT_EXECUTED]
    return [f"{block.where}: ```{block.language} {block.mode or ''}``` does not say what it is; "
            f"write ```<language> <{'|'.join(allowed)}>``` (docs/contributing.md)"]


def check_fragment(block: Block) -> None:
    """A fragment `of=PATH` is part of that file: for YAML, every key and value it gives is in the file's
    document; otherwise its lines are the file's, in order."""
    path = REPO / block.options["of"]
    if path.suffix in (".yaml", ".yml"):
        import yaml
        part, whole = yaml.safe_load(block.code), yaml.safe_load(path.read_text())
        assert _within(part, whole), f"{block.where}: not part of {block.options['of']}"
        return
    source = path.read_text().splitlines()
    at = 0
    for line in filter(str.strip, block.code.splitlines()):
        while at < len(source) and source[at].strip() != line.strip():
            at += 1
        assert at < len(source), f"{block.where}: {line.strip()!r} is not in {block.options['of']} after the lines before it"
        at += 1


def _within(part, whole) -> bool:
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and _within(v, whole[k]) for k, v in part.items())
    if isinstance(part, list):
        return isinstance(whole, list) and all(any(_within(p, w) for w in whole) for p in part)
    return part == whole


def run_python(block: Block, python: str, workdir: Path) -> subprocess.CompletedProcess:
    script = workdir / "block.py"
    script.write_text(block.code)
    return subprocess.run([python, str(script)], cwd=workdir, capture_output=True, text=True, timeout=BLOCK_SECONDS)


_PROGRAM_RUNNER = textwrap.dedent("""\
    import json, sys
    from trainjobs.testing import Secret, run_program
    settings = json.loads(sys.argv[2])
    result = run_program(sys.argv[1], stack="docs", config=settings.get("config"),
                         stack_outputs=settings.get("stack_outputs"))
    print(json.dumps({k: v.value if isinstance(v, Secret) else v for k, v in result.outputs.items()}, default=str))
""")


def run_program(block: Block, python: str, workdir: Path) -> subprocess.CompletedProcess:
    """The block as a project's program under the test kit; fails when the exports differ from `outputs`."""
    (workdir / "Pulumi.yaml").write_text("name: docs\nruntime: python\n")
    (workdir / "__main__.py").write_text(block.code)
    done = subprocess.run([python, "-c", _PROGRAM_RUNNER, str(workdir / "__main__.py"), json.dumps(block.settings)],
                          cwd=workdir, capture_output=True, text=True, timeout=BLOCK_SECONDS)
    expected = block.settings.get("outputs")
    if done.returncode == 0 and expected is not None:
        exported = json.loads(done.stdout.strip().splitlines()[-1])
        if any(exported.get(k) != v for k, v in expected.items()):
            return subprocess.CompletedProcess(done.args, 1, done.stdout,
                                               f"exports {exported}, the page says {expected}")
    return done


def run_tests(test_blocks: list[Block], python: str, workdir: Path, name: str = "test_docs_page.py",
              env: dict | None = None) -> subprocess.CompletedProcess:
    """A page's test blocks as one module, under pytest; fails unless every test it defines passed."""
    (workdir / name).write_text("\n\n".join(b.code for b in test_blocks))
    done = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", name], cwd=workdir,
                          capture_output=True, text=True, timeout=BLOCK_SECONDS, env=env)
    defined = sum(len(re.findall(r"^def test_", b.code, re.M)) for b in test_blocks)
    if done.returncode == 0 and not re.search(rf"\b{defined} passed\b", done.stdout):
        return subprocess.CompletedProcess(done.args, 1, done.stdout, f"expected {defined} passed tests")
    return done


def run_shell(block: Block, copy: Path) -> subprocess.CompletedProcess:
    """The block's commands by bash in a copy of the repository; fails if they change a tracked file."""
    def tracked() -> dict[str, bytes]:
        return {str(p.relative_to(copy)): p.read_bytes() for p in copy.rglob("*")
                if p.is_file() and ".venv" not in p.parts and "__pycache__" not in p.parts}

    before = tracked()
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=copy, capture_output=True, text=True,
                          timeout=BLOCK_SECONDS)
    after = tracked()
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    if done.returncode == 0 and changed:
        return subprocess.CompletedProcess(done.args, 1, done.stdout, f"the commands changed {changed}")
    return done
