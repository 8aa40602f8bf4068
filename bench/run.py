"""What trainjobs costs: registration against the same objects registered directly, derivation,
render, per-pod views, the MPI launcher's readiness check against host count and (optionally)
run-local against bare torchrun and at 3 and 40 MPI hosts.

    python bench/run.py [--only SECTION ...] [--out results.json] [--run-local [--before DIR]]

Sides being compared run alternately (A B A B ...), each measurement in a fresh process, and the
table gives medians and the median of the per-pair ratios. Before registration is timed, the
component, raw and floor sides are checked to register the same objects with the same inputs.
Results are printed and written as JSON (default: bench/results/<time>.json).
"""

import argparse
import datetime
import gc
import importlib.metadata
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

import launcher  # noqa: E402
import registration  # noqa: E402
from measure import DERIVE, VIEWS  # noqa: E402

ROUNDS = {10: 5, 100: 5, 1000: 2}       # registration rounds per N (one round: component, raw, floor)
REPEATS = {10: 5, 100: 1, 1000: 1}      # runs per measurement process, of which it reports the median
DERIVE_NODES = [8, 64, 512, 4096, 16384]
VIEW_BUDGET = 60.0                      # seconds one view may take before it is reported as over budget
VIEW_REPEATS = 3                        # for views that take under VIEW_REPEAT_BELOW seconds
VIEW_REPEAT_BELOW = 10.0
RENDER_PAIRS = 8
RENDER_200_JOBS = 200
RENDER_200_PAIRS = 4
RUN_LOCAL_PAIRS = 3
IMPORT_FLOOR = "import pulumi, pulumi_kubernetes.core.v1, pulumi_kubernetes.batch.v1"
SECTIONS = ("derive", "register", "views", "render", "render200", "launcher")
LOCAL_SECTIONS = ("run-local", "run-local-mpi")   # with --run-local
PAIRS = (("component", "raw"), ("component", "floor"), ("floor", "raw"))   # registration ratios


def child_env() -> dict[str, str]:
    """This interpreter's scripts (trainjobs, torchrun) first on PATH: the version measured is the one
    installed in the interpreter that runs the benchmark."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(p for p in (str(Path(sys.executable).parent), env.get("PATH")) if p)
    return env


def measure(*args: str) -> list[dict[str, Any]]:
    """Run bench/measure.py in a fresh process; its JSON lines."""
    done = subprocess.run([sys.executable, str(HERE / "measure.py"), *args], env=child_env(), cwd=REPO,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"measure.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], cwd: Path = REPO) -> tuple[float, float]:
    """Wall and CPU seconds of `argv` from start to exit, its children included (output discarded)."""
    start, cpu_start = time.perf_counter(), _children_cpu()
    done = subprocess.run(argv, env=child_env(), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu_start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, cpu


def median(values: list[float]) -> float:
    return statistics.median(values)


def ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b)]


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[c if isinstance(c, str) else f"{c:.3f}" if isinstance(c, float) else str(c) for c in row]
             for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = lambda values: "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths)))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


def say(text: str = "") -> None:
    print(text, flush=True)


# --- sections -----------------------------------------------------------------------------------------

def section_derive() -> dict[str, Any]:
    say("## Derivation alone (median per call of 5 samples of about 0.1 s; each family in one fresh process)")
    rows = [m for family in DERIVE for m in measure("derive", family, *map(str, DERIVE_NODES))]
    say(table(["family", "nodes", "ms per call", "CPU ms per call", "CPU µs per node"],
              [[r["family"], r["nodes"], r["seconds"] * 1e3, r["cpu_seconds"] * 1e3, r["cpu_seconds"] * 1e6 / r["nodes"]]
               for r in rows]))
    return {"rows": rows}


def check_sides(family: str, names: list[str]) -> dict[str, Any]:
    """The raw and floor spec from the component's registrations; refuses unless all three register the same."""
    component = registration.record(registration.component_program(family, names))
    spec = registration.spec_from(component, family, names)
    for side in ("raw", "floor"):
        other = registration.record(registration.program_for(side, spec))
        found = registration.differences(component, other, side)
        if found:
            raise SystemExit(f"{family} N={len(names)}: the {side} side does not register what the component "
                             "registers; not timing it:\n  " + "\n  ".join(found))
    return spec


def section_register() -> dict[str, Any]:
    say("## Registration under the test kit's mocks: component vs the same objects registered directly")
    say("raw: the component's objects (key resource included) registered directly; floor: raw plus one bare "
        "ComponentResource per job.")
    say("Each round runs the three sides in turn (rotating which goes first), each in a fresh process after a "
        "1-job warm-up; "
        "rounds: " + ", ".join(f"{r} at N={n}" for n, r in ROUNDS.items()) + " (fewer for the big N); "
        + ", ".join(f"at N={n} a measurement is the median of {r} runs in its process" for n, r in REPEATS.items()
                    if r > 1) + ".")
    rows = []
    with tempfile.TemporaryDirectory(prefix="trainjobs-bench-") as tmp:
        for n, rounds in ROUNDS.items():
            for family in registration.CASES:
                spec_file = Path(tmp) / f"{family}-{n}.json"
                spec_file.write_text(json.dumps(check_sides(family, registration.job_names(n))))
                gc.collect()
                runs: dict[str, list[dict[str, float]]] = {side: [] for side in registration.SIDES}
                for i in range(rounds):   # each round starts with the next side, so none always runs first
                    for side in registration.SIDES[i % 3:] + registration.SIDES[:i % 3]:
                        runs[side] += measure("register", str(spec_file), side, str(REPEATS[n]))
                row: dict[str, Any] = {"family": family, "jobs": n, "rounds": rounds}
                for clock, key in (("wall", "seconds"), ("cpu", "cpu_seconds")):
                    times = {side: [m[key] for m in runs[side]] for side in registration.SIDES}
                    row[clock] = {"seconds": times, **{f"{a}/{b}": ratios(times[a], times[b]) for a, b in PAIRS}}
                row["gc_share"] = {side: median([m["gc_seconds"] / m["seconds"] for m in runs[side]])
                                   for side in registration.SIDES}
                rows.append(row)
                say(f"  {family} N={n}: component {median(row['wall']['seconds']['component']):.3f} s, "
                    f"raw {median(row['wall']['seconds']['raw']):.3f} s, "
                    f"floor {median(row['wall']['seconds']['floor']):.3f} s")
    for clock, title in (("wall", "wall time"), ("cpu", "CPU time (the process and its children)")):
        say(f"\n{title}:")
        say(table(["family", "jobs", "rounds", "component s", "raw s", "floor s",
                   *(f"{a}/{b}".replace("component", "comp") for a, b in PAIRS), *(["gc% comp", "gc% raw"] if clock == "wall" else [])],
                  [[r["family"], r["jobs"], r["rounds"], *(median(r[clock]["seconds"][side]) for side in registration.SIDES),
                    *(f"{median(r[clock][f'{a}/{b}']):.2f}" for a, b in PAIRS),
                    *([f"{100 * r['gc_share']['component']:.0f}", f"{100 * r['gc_share']['raw']:.0f}"]
                      if clock == "wall" else [])] for r in rows]))
    return {"rounds": ROUNDS, "repeats": REPEATS, "rows": rows}


def _view(case: str) -> dict[str, Any]:
    process = subprocess.Popen([sys.executable, str(HERE / "measure.py"), "view", case], env=child_env(), cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    registered = json.loads(process.stdout.readline() or "{}")
    if not registered:
        raise SystemExit(f"view {case} failed:\n{process.communicate()[1][-3000:]}")
    try:
        out, err = process.communicate(timeout=VIEW_BUDGET)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return {**registered, "view_seconds": None}
    if process.returncode != 0:
        raise SystemExit(f"view {case} failed:\n{err[-3000:]}")
    return {**registered, **json.loads(out)}


VIEW_PROGRAM = '''"""The jobs of one per-pod view case of the benchmark."""
import trainjobs

for kind, name, args in {jobs!r}:
    getattr(trainjobs, kind)(name, args)
'''


def _view_renders(case: str, directory: Path) -> list[tuple[float, float]]:
    """Wall and CPU seconds of whole `trainjobs render` processes of the case's jobs, each into an empty directory."""
    directory.mkdir()
    (directory / "Pulumi.yaml").write_text("name: bench-views\nruntime: python\nmain: __main__.py\n")
    (directory / "__main__.py").write_text(VIEW_PROGRAM.format(jobs=VIEWS[case]))
    return [timed(_render_argv(directory / "__main__.py", "bench", directory / f"out-{i}")) for i in range(VIEW_REPEATS)]


def section_views() -> dict[str, Any]:
    say(f"## Per-pod views: trainjobs.tools.cli.render.ranks_text (budget {VIEW_BUDGET:.0f} s per run; "
        f"up to {VIEW_REPEATS} runs when one takes under {VIEW_REPEAT_BELOW:.0f} s), and whole `trainjobs render` "
        f"processes of the same jobs ({VIEW_REPEATS} runs)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="trainjobs-bench-") as tmp:
        for number, case in enumerate(VIEWS):
            runs = [_view(case)]
            while (len(runs) < VIEW_REPEATS and runs[-1]["view_seconds"] is not None
                   and runs[-1]["view_seconds"] < VIEW_REPEAT_BELOW):
                runs.append(_view(case))
            over = any(r["view_seconds"] is None for r in runs)
            renders = [] if over else _view_renders(case, Path(tmp) / f"case-{number}")
            row = {"case": case, "runs": runs, "over_budget": over,
                   "view_seconds": None if over else median([r["view_seconds"] for r in runs]),
                   "view_cpu_seconds": None if over else median([r["view_cpu_seconds"] for r in runs]),
                   "register_seconds": median([r["register_seconds"] for r in runs]), "pods": runs[0]["pods"],
                   "render_seconds": [wall for wall, _ in renders], "render_cpu_seconds": [cpu for _, cpu in renders]}
            rows.append(row)
            say(f"  {case}: " + (f"over budget (> {VIEW_BUDGET:.0f} s)" if over else
                                 f"view {row['view_seconds']:.3f} s, render {median(row['render_seconds']):.2f} s"))
    say(table(["case", "pods", "runs", "registration s", "view s", "view CPU s", "render s", "render CPU s"],
              [[r["case"], r["pods"], len(r["runs"]), r["register_seconds"],
                *([f"> {VIEW_BUDGET:.0f} (over budget)", "-", "-", "-"] if r["over_budget"]
                  else [r["view_seconds"], r["view_cpu_seconds"], median(r["render_seconds"]),
                        median(r["render_cpu_seconds"])])] for r in rows]))
    return {"budget_seconds": VIEW_BUDGET, "rows": rows}


def _render_argv(program: Path, stack: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "trainjobs.tools.cli", "render", str(program), "--stack", stack, "--out", str(out)]


def _pairs_table(name: str, a: str, b: str, runs: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    """Print and return wall and CPU medians of two alternating sides and the medians of their ratios."""
    row: dict[str, Any] = {}
    cells = []
    for i, clock in enumerate(("wall", "cpu")):
        times = {side: [m[i] for m in runs[side]] for side in (a, b)}
        row[clock] = {"seconds": times, f"{b}/{a}": ratios(times[b], times[a])}
        cells.append([f"{name} ({clock})", median(times[a]), median(times[b]),
                      f"{median(row[clock][f'{b}/{a}']):.2f}"])
    say(table(["case", f"{a} s", f"{b} s", f"{b}/{a}"], cells))
    return row


def section_render() -> dict[str, Any]:
    say(f"## `trainjobs render` of the example stack vs a process that only runs `{IMPORT_FLOOR}`")
    say(f"{RENDER_PAIRS} pairs, alternating; the whole process, interpreter start and exit included.")
    runs: dict[str, list[tuple[float, float]]] = {"imports": [], "render": []}
    with tempfile.TemporaryDirectory(prefix="trainjobs-bench-") as tmp:
        for i in range(RENDER_PAIRS):
            runs["render"].append(timed(_render_argv(REPO / "stacks" / "__main__.py", "dev", Path(tmp) / f"out-{i}")))
            runs["imports"].append(timed([sys.executable, "-c", IMPORT_FLOOR]))
    return _pairs_table("example stack", "imports", "render", runs)


PROGRAM_200 = '''\
"""{jobs} training jobs from the stack config: torch and MPI in turn."""
import pulumi
from trainjobs import MpiTrainJob, TorchTrainJob

TORCH = {torch!r}
MPI = {mpi!r}
for i in range(pulumi.Config().require_int("jobs")):
    if i % 2:
        MpiTrainJob(f"mpi-{{i}}", MPI)
    else:
        TorchTrainJob(f"torch-{{i}}", TORCH)
'''


def write_program_200(directory: Path) -> Path:
    (directory / "Pulumi.yaml").write_text("name: bench-render\nruntime: python\nmain: __main__.py\n")
    (directory / "Pulumi.bench.yaml").write_text(f"config:\n  bench-render:jobs: {RENDER_200_JOBS}\n")
    program = directory / "__main__.py"
    program.write_text(PROGRAM_200.format(jobs=RENDER_200_JOBS, torch=registration.CASES["torch"][1],
                                          mpi=registration.CASES["mpi"][1]))
    return program


def section_render200() -> dict[str, Any]:
    say(f"## render and re-render of a {RENDER_200_JOBS}-job program (half torch, half MPI)")
    say(f"render: into an empty directory; re-render: over the previous render of the same program "
        f"(reads it back and lists the changes). {RENDER_200_PAIRS} pairs, alternating.")
    runs: dict[str, list[tuple[float, float]]] = {"render": [], "re-render": []}
    with tempfile.TemporaryDirectory(prefix="trainjobs-bench-") as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        program = write_program_200(project)
        again = Path(tmp) / "again"
        timed(_render_argv(program, "bench", again))   # the previous render the re-renders read
        written = len(list(again.glob("*.yaml")))
        for i in range(RENDER_200_PAIRS):
            runs["render"].append(timed(_render_argv(program, "bench", Path(tmp) / f"out-{i}")))
            runs["re-render"].append(timed(_render_argv(program, "bench", again)))
    say(f"{written} objects written")
    return {"jobs": RENDER_200_JOBS, "objects": written, **_pairs_table(f"{RENDER_200_JOBS} jobs", "render",
                                                                         "re-render", runs)}


RUN_LOCAL_PROGRAM = '''\
"""A 2-pod x 2-process TorchTrainJob running the example training script."""
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import TorchTrainJob

code = k8s.core.v1.ConfigMap("bench-ddp-code", metadata={{"name": "bench-ddp-code"}},
                             data={{"train.py": Path({script!r}).read_text()}})
TorchTrainJob("bench-ddp", {{
    "num_nodes": 2,
    "num_proc_per_node": 2,
    "command": ["torchrun", "/workspace/train.py"],
    "env": {{"OMP_NUM_THREADS": "1"}},
    "volumes": [{{"name": "code", "configMap": {{"name": "bench-ddp-code"}}}}],
    "volume_mounts": [{{"name": "code", "mountPath": "/workspace", "readOnly": True}}],
}}, pulumi.ResourceOptions(depends_on=[code]))
'''


def _bare_torchrun(torchrun: str, script: Path) -> float:
    """Two torchrun agents on loopback, as the two pods would run, until both exit."""
    env = {**child_env(), "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    agents = [subprocess.Popen([torchrun, "--nnodes=2", "--nproc-per-node=2", f"--node-rank={rank}",
                                "--master-addr=127.0.0.1", "--master-port=29511", str(script)],
                               env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
              for rank in (0, 1)]
    errors = [a.communicate(timeout=300)[1] for a in agents]
    seconds = time.perf_counter() - start
    failed = [(a.returncode, e) for a, e in zip(agents, errors) if a.returncode != 0]
    if failed:
        raise SystemExit(f"bare torchrun failed ({failed[0][0]}):\n{failed[0][1][-3000:]}")
    return seconds


def section_run_local() -> dict[str, Any]:
    say("## run-local of a 2x2 torch job vs two bare torchrun agents on loopback (same training script)")
    say(f"{RUN_LOCAL_PAIRS} pairs, alternating; wall time only (the pods' CPU time is not all seen from here).")
    torchrun = shutil.which("torchrun", path=child_env()["PATH"])
    if os.geteuid() != 0 or torchrun is None:
        raise SystemExit("--run-local needs root and torch installed (torchrun on PATH); see docs/local-run.md")
    script = REPO / "stacks" / "train.py"
    local, bare = [], []
    with tempfile.TemporaryDirectory(prefix="trainjobs-bench-") as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        (project / "Pulumi.yaml").write_text("name: bench-run-local\nruntime: python\nmain: __main__.py\n")
        program = project / "__main__.py"
        program.write_text(RUN_LOCAL_PROGRAM.format(script=str(script)))
        for i in range(RUN_LOCAL_PAIRS):
            run_dir = Path(tmp) / f"run-{i}"
            run_dir.mkdir()
            local.append(timed([sys.executable, "-m", "trainjobs.tools.cli", "run-local", str(program), "--stack", "bench",
                                "--quiet", "--timeout", "300", "--run-dir", str(run_dir)])[0])
            bare.append(_bare_torchrun(torchrun, script))
    row = {"run_local": local, "torchrun": bare, "run_local/torchrun": ratios(local, bare)}
    say(table(["case", "run-local s", "torchrun s", "run-local/torchrun"],
              [["2x2 torch", median(local), median(bare), f"{median(row['run_local/torchrun']):.2f}"]]))
    return row


MPI_HOSTS = (3, 40)
MPI_ROUNDS = 3


def _run_local_mpi(hosts: int, run_dir: Path, before: Path | None) -> float:
    """Wall seconds of `trainjobs run-local` of bench/mpi_hostname at `hosts` hosts (`before`: a
    `pip install --target` directory holding another version, run instead of this one)."""
    env = {**child_env(), **({"PYTHONPATH": str(before)} if before else {})}
    trainjobs = str(before / "bin" / "trainjobs") if before else shutil.which("trainjobs", path=env["PATH"])
    argv = [trainjobs, "run-local", str(HERE / "mpi_hostname" / "__main__.py"), "--config", f"num_nodes={hosts}",
            "--quiet", "--timeout", "300", "--run-dir", str(run_dir)]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"run-local of {hosts} MPI hosts failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return seconds


def section_run_local_mpi(before: Path | None = None) -> dict[str, Any]:
    say("## run-local of `mpirun -N 1 hostname` (bench/mpi_hostname) at 3 and 40 worker hosts")
    if os.geteuid() != 0 or not Path("/usr/bin/mpirun.openmpi").exists():
        raise SystemExit("--run-local needs root and openmpi-bin, openssh-server; see docs/local-run.md")
    sides = {"this checkout": None, **({f"before ({before})": before} if before else {})}
    say(f"{MPI_ROUNDS} rounds; in each, every side runs 3 then 40 hosts back to back (sides in turn first); "
        "wall time of the whole process.")
    runs: dict[str, dict[int, list[float]]] = {side: {n: [] for n in MPI_HOSTS} for side in sides}
    with tempfile.TemporaryDirectory(prefix="trainjobs-bench-") as tmp:
        names = list(sides)
        for i in range(MPI_ROUNDS):
            for side in names[i % len(names):] + names[:i % len(names)]:
                for hosts in MPI_HOSTS:
                    run_dir = Path(tmp) / f"{len(list(Path(tmp).iterdir()))}"
                    run_dir.mkdir()
                    runs[side][hosts].append(_run_local_mpi(hosts, run_dir, sides[side]))
    rows = [[side, median(r[3]), median(r[40]), f"{median(ratios(r[40], r[3])):.2f}"] for side, r in runs.items()]
    say(table(["side", "3 hosts s", "40 hosts s", "40/3 (median of rounds)"], rows))
    return {side: {str(n): v for n, v in r.items()} for side, r in runs.items()}


def section_launcher() -> dict[str, Any]:
    return launcher.section(say, table)


RUNNERS = {"derive": section_derive, "register": section_register, "views": section_views,
           "render": section_render, "render200": section_render200, "launcher": section_launcher,
           "run-local": section_run_local, "run-local-mpi": section_run_local_mpi}


# --- the machine and the results file -----------------------------------------------------------------

def machine() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo")
    models = [line.split(":", 1)[1].strip() for line in (cpuinfo.read_text() if cpuinfo.exists() else "").splitlines()
              if line.startswith("model name")]
    versions = {}
    for package in ("pulumi", "pulumi_kubernetes", "pulumi_tls", "pydantic", "PyYAML"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() if shutil.which("git") else ""
    return {"nproc": os.cpu_count(), "cpu": models[0] if models else platform.processor(), "python": platform.python_version(), "platform": platform.platform(),
            "packages": versions, "libyaml": bool(getattr(yaml, "__with_libyaml__", False)), "commit": commit}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=SECTIONS + LOCAL_SECTIONS, metavar="SECTION",
                        help=f"run only this section; repeatable ({', '.join(SECTIONS + LOCAL_SECTIONS)})")
    parser.add_argument("--run-local", action="store_true",
                        help="also measure run-local against bare torchrun, and at 3 and 40 MPI hosts (needs root, "
                             "torch, openmpi-bin and openssh-server)")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="run-local-mpi: also time the version installed in DIR (pip install --target DIR)")
    parser.add_argument("--out", type=Path, help="results file (default: bench/results/<time>.json)")
    options = parser.parse_args()
    sections = options.only or [*SECTIONS, *(LOCAL_SECTIONS if options.run_local else ())]
    started = datetime.datetime.now().astimezone()
    out = options.out or HERE / "results" / f"{started:%Y%m%d-%H%M%S}.json"
    info = machine()
    say(f"# trainjobs benchmark, {started:%Y-%m-%d %H:%M %Z}, commit {info['commit'] or '?'}")
    say(f"{info['nproc']} CPUs ({info['cpu']}), Python {info['python']}, load average {os.getloadavg()[0]:.2f}")
    say("Times are medians; ratios are medians of per-pair ratios. On a shared machine, compare ratios, "
        "CPU-time ones first.")
    results: dict[str, Any] = {"machine": info, "command": " ".join([Path(sys.executable).name, *sys.argv]),
                               "started": started.isoformat(), "load_average_start": os.getloadavg(), "sections": {}}
    clock = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in sections:   # the file is rewritten after each section, so a failure keeps what was measured
        say()
        results["sections"][name] = RUNNERS[name](options.before) if name == "run-local-mpi" else RUNNERS[name]()
        results["elapsed_seconds"] = time.perf_counter() - clock
        results["load_average_end"] = os.getloadavg()
        out.write_text(json.dumps(results, indent=2) + "\n")
    say(f"\n{len(sections)} sections in {results['elapsed_seconds']:.0f} s; "
        f"load average {os.getloadavg()[0]:.2f}; results in {out}")


if __name__ == "__main__":
    main()
