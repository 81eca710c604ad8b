"""Every shell example of the documentation (README.md and docs/**/*.md) is checked, so a page that drifts
from the code fails here.

Each fenced shell block (```console, ```bash, ```sh, ```shell) carries a marker, an HTML comment on the
line just before its fence (invisible on GitHub and in the mkdocs site):

    <!-- docs-test: run -->                 executed; `$ ` lines are commands, the lines under each are its
                                            expected stdout (exit 0)
    <!-- docs-test: run exit=3 -->          the same, each command exits 3 and the expected lines are its
                                            stdout then stderr (an error is shown as the user sees it)
    <!-- docs-test: syntax REASON -->       not executed (REASON: it needs a Neuron host, a cloud, Docker,
                                            a running server, or takes minutes): every `neuronforge ...` is
                                            parsed by the CLI's own parser, every `make X` must be a Makefile
                                            target, and the whole block must pass `bash -n`
    <!-- docs-test: run fakes=optimum,hub -->
                                            executed as `run`, with the FAKES named put in place for that
                                            block only (a comma list; `exit=N` may follow):
        optimum   the fake Neuron SDK 2.26.1 with optimum-neuron 0.4.5's entry point (tests/fakes: what
                  tests/conftest.py's `fake_optimum` installs) as the toolchain interpreter of SDK 2.26.1
                  (NEURONFORGE_TOOLCHAIN_PYTHON_2_26_1), on a host with Neuron devices
                  (FAKE_NEURON_DEVICES, the fake `neuron-ls` first on PATH); `python` in the block IS
                  that interpreter: it stands for the Python of the toolchain host (the SDK image's),
                  where optimum-neuron is installed
        hub       a FAKE Hugging Face Hub (tests/fakes/hub) on 127.0.0.1, one per session, serving the
                  session's tiny Llama as `tiny-org/tiny-llama`: HF_ENDPOINT names it, HF_TOKEN=hf_writer
                  (user `me`, who may write `me/*` and `my-org/*`), HF_HUB_OFFLINE=0, and HF_HOME /
                  HF_HUB_CACHE under `.neuronforge/hf/` (the Hub's repositories live outside the clone)
                  The page must say, next to such examples, that in this test the Hub is a local
                  Hub-compatible endpoint and the SDK a fake.

Expected output is matched line by line, exactly, except: a line that is only `…` matches any number
of lines (none included), and `…` inside a line matches any characters there (`"cache_key": "…`).

`run` blocks execute in page order, each page in a fresh clone of the checkout (its tracked files as
the working tree has them, committed in a repository of its own) with `.neuronforge` linked to one home
shared by the session, and `neuronforge` on PATH. The session starts as `make demo` leaves a clone: the
demo's target published in `.neuronforge/store` (built once with `neuronforge run`; later examples hit
it). After each page, everything its examples wrote must be under `.neuronforge/` (the one folder
examples write to, gitignored) and `make clean` must leave the clone as it was: `git status --porcelain
--ignored` empty.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from neuronforge.common import settings
from neuronforge.compilation.backends.interpreter import release_var
from neuronforge.interfaces.cli import build_parser
from tests.conftest import Compiled
from tests.fakes import OPTIMUM, SDK_2_26_1, fake_python, neuron_host_path
from tests.fakes.hub import FakeHub

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELLS = ("console", "bash", "sh", "shell")
FENCE = re.compile(r"^(?P<fence>```+|~~~+)[ \t]*(?P<info>[^\n]*)$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(?P<kind>\w+)(?P<rest>.*?)-->\s*$")
ELLIPSIS = ("…", "...")
FAKES_OPTION = re.compile(r"(?:^|\s)fakes=(?P<names>\S*)")
KNOWN_FAKES = ("optimum", "hub")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    kind: str | None  # run | syntax | None (unmarked)
    options: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def fakes(self) -> tuple[str, ...]:
        """The fakes its marker names (`fakes=optimum,hub`), in order."""
        m = FAKES_OPTION.search(self.options)
        return tuple(n for n in m["names"].split(",") if n) if m else ()


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page whose language is a shell, with the marker before it."""
    lines = page.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m["fence"], m["info"].strip()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), len(lines))
        lang = info.split()[0].lstrip(".").strip("{}") if info else ""
        if lang in SHELLS:
            prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            mm = MARKER.match(prev.strip())
            text = "\n".join(lines[i + 1 : end]) + "\n"
            out.append(Block(page, i + 1, lang, mm["kind"] if mm else None, (mm["rest"] if mm else "").strip(), text))
        i = end + 1
    return out


ALL = [b for page in PAGES for b in blocks(page)]


def _id(b: Block) -> str:
    return f"{b.where}[{b.kind}]"


def commands(block: Block) -> list[tuple[str, str]]:
    """(command, expected output) pairs: `$ ` lines of a console block (a trailing `\\` continues a
    command on the next line); every line of a bash block (comments dropped, no expected output)."""
    out: list[tuple[str, str]] = []
    lines = block.text.splitlines()
    if block.lang == "console":
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                assert not out, f"{block.where}: output line before any `$ ` command: {lines[i]!r}"
                i += 1
                continue
            cmd = lines[i][2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            i += 1
            expected: list[str] = []
            while i < len(lines) and not lines[i].startswith("$ "):
                expected.append(lines[i])
                i += 1
            out.append((cmd, "\n".join(expected)))
        return out
    joined = re.sub(r"\\\n", " ", block.text)
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append((shlex.join(words), ""))
    return out


def matches(expected: str, actual: str) -> bool:
    """`…` alone on a line: any lines (none included); `…` inside a line: any characters there."""
    pattern = ""
    for line in expected.splitlines():
        if line.strip() in ELLIPSIS:
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += r"[^\n]*".join(re.escape(part) for part in line.split("…")) + r"\n"
    text = actual if actual.endswith("\n") or not actual else actual + "\n"
    return re.fullmatch(pattern, text) is not None


def test_every_shell_block_is_marked() -> None:
    bad = [f"{b.where}: ```{b.lang} without a <!-- docs-test: run|syntax --> marker" for b in ALL if b.kind is None]
    bad += [f"{b.where}: unknown kind {b.kind!r}" for b in ALL if b.kind not in (None, "run", "syntax")]
    bad += [f"{b.where}: a syntax block needs a reason" for b in ALL if b.kind == "syntax" and not b.options]
    bad += [f"{b.where}: run blocks are ```console" for b in ALL if b.kind == "run" and b.lang != "console"]
    bad += [f"{b.where}: fakes are for run blocks" for b in ALL if b.kind != "run" and FAKES_OPTION.search(b.options)]
    bad += [
        f"{b.where}: unknown fake {name!r} (known: {', '.join(KNOWN_FAKES)})"
        for b in ALL
        if b.kind == "run"
        for name in (b.fakes or (("",) if FAKES_OPTION.search(b.options) else ()))
        if name not in KNOWN_FAKES
    ]
    assert not bad, "\n".join(bad)


def test_the_docs_have_examples() -> None:
    runs = [b for b in ALL if b.kind == "run"]
    assert len(runs) >= 10 and {b.page.name for b in runs} >= {"README.md", "cli.md"}


def test_the_matcher() -> None:
    assert matches("a\n…\nz", "a\nb\nc\nz\n") and matches("a\n…\nz", "a\nz\n")
    assert matches("x: 1…", "x: 12 34\n") and not matches("x: 1…", "x: 2\n")
    assert matches("…b…", "abc\n") and not matches("…b…", "ac\n")
    assert not matches("a\nz", "a\nb\nz\n") and not matches("a", "a\nb\n")


def test_the_fakes_option() -> None:
    """`fakes=` names the fakes of a run block, in order, beside its other options."""
    block = Block(ROOT / "page.md", 1, "console", "run", "fakes=optimum,hub exit=3", "")
    assert block.fakes == ("optimum", "hub")
    assert Block(ROOT / "page.md", 1, "console", "run", "exit=3", "").fakes == ()
    assert set(KNOWN_FAKES) == {"optimum", "hub"}


def test_the_readme_links_resolve() -> None:
    """mkdocs checks the links of docs/; the README's own relative links must name files of the clone."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    local = [link for link in links if "://" not in link]
    assert local and all((ROOT / link).exists() for link in local), [x for x in local if not (ROOT / x).exists()]


# ---- syntax blocks ---------------------------------------------------------------------------------

MAKE_TARGETS = set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


def _argv(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]  # VAR=value prefixes
    return words


@pytest.mark.parametrize("block", [b for b in ALL if b.kind == "syntax"], ids=_id)
def test_syntax_block(block: Block) -> None:
    script = "\n".join(c for c, _ in commands(block))
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert done.returncode == 0, f"{block.where}: bash -n: {done.stderr}"
    for command, _ in commands(block):
        for part in re.split(r"\s(?:&&|\|\||;|\|)\s", command):
            argv = _argv(part)
            if not argv:
                continue
            if Path(argv[0]).name == "neuronforge":
                try:
                    build_parser().parse_args(argv[1:])
                except SystemExit as exc:
                    pytest.fail(f"{block.where}: the CLI refuses {part!r} (exit {exc.code})")
            elif argv[0] == "make":
                targets = [a for a in argv[1:] if not a.startswith("-") and "=" not in a]
                missing = [t for t in targets if t not in MAKE_TARGETS]
                assert not missing, f"{block.where}: no Makefile target {missing} in {part!r}"


# ---- run blocks ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def docs_home(tmp_path_factory: pytest.TempPathFactory, compiled: Compiled) -> Path:
    """The session's NEURONFORGE_HOME, as `make demo` leaves it: the demo's target published, by a real
    `neuronforge run`. The embedded model is the session's tiny Llama (same generator, same target), so
    the store starts with the compile cache of the session's one compile: the graphs are reused, not
    compiled again."""
    home = tmp_path_factory.mktemp("docs-home")
    shutil.copytree(
        Path(compiled.store.root_uri.removeprefix("file://")) / "neuron-cache", home / "store" / "neuron-cache"
    )
    t = settings.DEFAULT_TARGET
    argv = ["run", "--instance", t["instance_type"], "--tp", str(t["tp_degree"]), "--seq-len"]
    argv += [str(t["sequence_length"]), "--max-context-length", str(t["max_context_length"]), "--dtype", t["dtype"]]
    done = subprocess.run(_neuronforge(argv), env=_env(home), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return home


def _neuronforge(argv: list[str]) -> list[str]:
    return [str(Path(sys.executable).parent / "neuronforge"), *argv]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONFORGE_")}
    env["NEURONFORGE_HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["COLUMNS"] = "120"
    return env


# The fakes a run block may name (`fakes=`): see the module docstring.
DOCS_HUB_MODEL = "tiny-org/tiny-llama"  # the session's tiny Llama, as the fake Hub serves it
DOCS_HUB_TOKEN = "hf_writer"  # user `me`, who may write `me/*` and `my-org/*`


@dataclass(frozen=True)
class DocsFakes:
    python: Path  # the fake SDK 2.26.1 interpreter with optimum-neuron's entry point, named `python`
    hub: FakeHub


@pytest.fixture(scope="session")
def docs_fakes(tmp_path_factory: pytest.TempPathFactory, compiled: Compiled) -> Iterator[DocsFakes]:
    """The fakes of `fakes=` blocks, started once per session (only for a page that has such blocks):
    the fake SDK 2.26.1 + optimum-neuron interpreter as `<folder>/python`, and a fake Hub holding the
    session's tiny Llama (the docs home's model: same generator) as `tiny-org/tiny-llama`."""
    base = tmp_path_factory.mktemp("docs-fakes")
    python = fake_python(base / "toolchain-host" / "python", OPTIMUM, *SDK_2_26_1)
    with FakeHub(base / "hub", tokens={DOCS_HUB_TOKEN: ("me", ["my-org"])}) as hub:
        hub.add_model(DOCS_HUB_MODEL, compiled.checkpoint)
        yield DocsFakes(python, hub)


def _fakes_env(env: dict[str, str], names: tuple[str, ...], fakes: DocsFakes, cwd: Path) -> dict[str, str]:
    """`env` with the fakes `names` in place (what tests/conftest.py's `fake_optimum` and the
    `fake_hub` tests set), for one block."""
    env = dict(env)
    if "optimum" in names:
        env[release_var("2.26.1")] = str(fakes.python)
        env["FAKE_NEURON_DEVICES"] = "2"
        env["PATH"] = neuron_host_path(os.pathsep.join((str(fakes.python.parent), env["PATH"])))
    if "hub" in names:
        hf_home = cwd / EXAMPLES_FOLDER / "hf"  # examples write under .neuronforge/ only
        env.update(
            HF_ENDPOINT=fakes.hub.endpoint,
            HF_TOKEN=DOCS_HUB_TOKEN,
            HF_HUB_OFFLINE="0",
            HF_HOME=str(hf_home),
            HF_HUB_CACHE=str(hf_home / "hub"),
        )
    return env


def _clone(where: Path, home: Path) -> Path:
    """A fresh clone of the checkout as it is: each tracked file copied from the working tree (every
    top-level entry but the hidden ones when this is not a git checkout), committed in a repository of
    its own so that `git status` there shows whatever an example writes; `.neuronforge` the session's home."""
    where.mkdir()
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True).stdout
    files = [name for name in tracked.split("\0") if name]
    if files:
        for name in files:
            src = ROOT / name
            if src.is_file() or src.is_symlink():  # a tracked file deleted in the working tree is not copied
                (where / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, where / name, follow_symlinks=False)
    else:  # not a git checkout: every top-level entry but the hidden and generated ones, and .gitignore
        skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
        for src in ROOT.iterdir():
            if src.is_dir() and not src.name.startswith(".") and src.name not in ("build", "site"):
                shutil.copytree(src, where / src.name, ignore=skip)
            elif src.is_file() and (not src.name.startswith(".") or src.name == ".gitignore"):
                shutil.copy2(src, where / src.name)
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@localhost", "-c", "commit.gpgsign=false"]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "clone"]):
        subprocess.run([*git, *argv], cwd=where, check=True, capture_output=True)
    (where / ".neuronforge").symlink_to(home)
    return where


# The one folder documented examples write to (gitignored; `make clean` removes it): docs/development.md.
EXAMPLES_FOLDER = ".neuronforge"


def written(clone: Path) -> list[str]:
    """What is in the clone that its commit does not have: new files (ignored ones included), changed
    and deleted ones, as `git status --porcelain --ignored` names them."""
    done = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "-z"],
        cwd=clone,
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(entry[3:] for entry in done.stdout.split("\0") if entry)


def left_outside(paths: list[str]) -> list[str]:
    """The paths not under EXAMPLES_FOLDER (the folder itself, here a link to the session's home, is in it)."""
    return [p for p in paths if p != EXAMPLES_FOLDER and not p.startswith(f"{EXAMPLES_FOLDER}/")]


def test_what_examples_write_is_told_apart(tmp_path: Path) -> None:
    """The checks of `test_run_blocks`' clean-up on a clone of their own: a file written beside the
    checkout's files is outside the folder, one under `.neuronforge` is not, and `make clean` removes it."""
    clone = _clone(tmp_path / "clone", tmp_path / "home")
    (tmp_path / "home").mkdir()
    assert written(clone) == [".neuronforge"]  # the link to the home, nothing else
    (clone / "sweep.json").write_text("{}")
    (clone / "docs" / "index.md").write_text("changed")
    (clone / ".neuronforge" / "out.json").write_text("{}")
    assert left_outside(written(clone)) == ["docs/index.md", "sweep.json"]
    (clone / "sweep.json").unlink()
    subprocess.run(["git", "checkout", "-q", "docs/index.md"], cwd=clone, check=True)
    subprocess.run(["make", "clean"], cwd=clone, check=True, capture_output=True)
    assert written(clone) == [] and (tmp_path / "home" / "out.json").exists()  # the link went, not the home


RUN_PAGES = [p for p in PAGES if any(b.kind == "run" for b in blocks(p))]


@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_run_blocks(page: Path, docs_home: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    cwd = _clone(tmp_path / "clone", docs_home)
    failures = []
    for block in (b for b in blocks(page) if b.kind == "run"):
        exit_code = int(re.search(r"exit=(\d+)", block.options)[1]) if "exit=" in block.options else 0
        env = _env(docs_home)
        if block.fakes:
            env = _fakes_env(env, block.fakes, request.getfixturevalue("docs_fakes"), cwd)
        for command, expected in commands(block):
            done = subprocess.run(
                ["bash", "-o", "pipefail", "-c", command],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            actual = done.stdout + (done.stderr if exit_code else "")
            if done.returncode != exit_code:
                failures.append(f"{block.where}: `{command}` exited {done.returncode}, not {exit_code}:\n{done.stderr}")
            elif not matches(expected, actual):
                failures.append(f"{block.where}: `{command}` printed\n{actual}\ninstead of\n{expected}\n")
    if outside := left_outside(written(cwd)):
        failures.append(f"{page.name}'s examples wrote outside {EXAMPLES_FOLDER}/: {', '.join(outside)}")
    subprocess.run(["make", "clean"], cwd=cwd, capture_output=True, check=True)
    if left := written(cwd):
        failures.append(f"after {page.name}'s examples, `make clean` leaves: {', '.join(left)}")
    assert not failures, "\n".join(failures)


# ---- the site ----------------------------------------------------------------------------------------


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict`: every page in the nav, every link and anchor resolves."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
