"""`trainjobs`: render a Pulumi program's training jobs offline, explain what each pod sees, run them locally, import
jobs from Kubeflow Trainer, training-operator v1, the MPI Operator and Volcano, write the policy pack."""

import argparse
import importlib.util
import os
import sys
from pathlib import Path

import pulumi

from trainjobs import __version__
from trainjobs.backends import pod_sets
from trainjobs.tools.cli import render, status
from trainjobs.tools.cli.summary import SUMMARY_FILE
from trainjobs.core.errors import TrainJobError, TrainJobErrors
from trainjobs.tools.stackconfig import ConfigError, load_yaml
from trainjobs.tools.engine import run_program


def _config(pairs: list[str]) -> dict:
    """`--config KEY=VALUE` pairs; each VALUE is strict YAML (see trainjobs.tools.stackconfig)."""
    config = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config takes KEY=VALUE, got {pair!r}")
        if key in config:
            raise ConfigError(f"--config {key} is given twice; give it once")
        config[key] = load_yaml(value, f"--config {key}") if value else ""
    return config


def _stack_outputs(pairs: list[str]) -> dict[str, dict]:
    """`--stack-output STACK:NAME=VALUE` pairs as {stack: {name: value}}; each VALUE is strict YAML."""
    outputs: dict[str, dict] = {}
    for pair in pairs:
        reference, sep, value = pair.partition("=")
        stack, colon, name = reference.rpartition(":")
        if not sep or not colon or not stack or not name:
            raise ConfigError(f"--stack-output takes STACK:NAME=VALUE (e.g. acme/images/prod:trainerImage=...), "
                              f"got {pair!r}")
        outputs.setdefault(stack, {})[name] = load_yaml(value, f"--stack-output {reference}") if value else ""
    return outputs


def _run(args: argparse.Namespace, preview: bool = True):
    """The program's registrations: as a preview for render and explain (secrets from the stack file and
    other stacks' outputs need not be readable, keys are made at deploy time), as an update for
    run-local (real values, and real keys its pods log in with)."""
    program = Path(args.program)
    if not (program / "__main__.py" if program.is_dir() else program).is_file():
        raise FileNotFoundError(f"no program at {program}; give a Pulumi program file such as stacks/__main__.py")
    result = run_program(program, stack=args.stack, config=_config(args.config), preview=preview,
                         stack_outputs=_stack_outputs(args.stack_output), real_keys=not preview)
    for warning in result.warnings:   # as `pulumi preview` shows them
        print(f"warning: {warning}", file=sys.stderr)
    return result


def cmd_render(args: argparse.Namespace) -> int:
    out = Path(args.out or f"rendered/{args.stack}")
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out} is a file; choose a directory")
    result = _run(args)
    objects = render.kubernetes_objects(result)
    try:
        previous = render.previous_files(out)
        texts, changed = render.files(result, objects, previous)
        render.write_files(out, texts, previous)
    except FileExistsError:
        raise
    except OSError as exc:
        print(f"error: --out {out}: cannot write there: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(texts[render.TREE_FILE], end="")
    print(f"\nwrote {len(objects)} objects, {render.RANKS_FILE}, {render.TREE_FILE} and {SUMMARY_FILE} to {out}/")
    if changed is not None:
        print(f"\nchanges since the previous render in {out}/:")
        print("\n".join(f"  {line}" for line in changed.lines) if changed.lines else "  none")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    result = _run(args)
    objects = render.kubernetes_objects(result)
    selected = None
    if args.job:
        selected = render.pod_sets_named(objects, args.job)
        if not selected:
            sets = pod_sets(objects)
            jobs = sorted({s.job_name for s in sets if s.job_name})
            print(f"error: no job or Job {args.job!r}; jobs: {', '.join(jobs) or 'none'}; "
                  f"Jobs: {', '.join(s.name for s in sets) or 'none'}", file=sys.stderr)
            return 2
    print(render.ranks_text(objects, jobs=selected).rstrip())
    return 0


def _host_refused() -> bool:
    """Whether this machine cannot run pods (run-local's and the node agent's), each reason printed."""
    from trainjobs import localrun  # imported here: only the commands that run pods need it

    problems = localrun.host_problems()
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return bool(problems)


def cmd_run_local(args: argparse.Namespace) -> int:
    from trainjobs import localrun

    if _host_refused():
        return localrun.EXIT_USAGE
    result = _run(args, preview=False)
    objects = render.kubernetes_objects(result, redact=False)
    try:
        outcome = localrun.run_local(objects, jobs=args.job or None, timeout=args.timeout or None,
                                     run_root=args.run_dir, max_grace=args.grace, echo_logs=not args.quiet,
                                     verbose=args.verbose, disruptions=args.disrupt, admissions=args.admit,
                                     resizes=args.resize)
    except localrun.PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return localrun.EXIT_USAGE
    return outcome.exit_code


def cmd_node_agent(args: argparse.Namespace) -> int:
    from trainjobs import localrun
    from trainjobs.kube.client import ApiError
    from trainjobs.localrun.agent import node_agent

    if _host_refused():
        return localrun.EXIT_USAGE
    try:
        return node_agent(args.kubeconfig, nodes=args.nodes, node_prefix=args.node_prefix, run_root=args.run_dir,
                          max_grace=args.grace, disruptions=args.disrupt, echo_logs=not args.quiet,
                          verbose=args.verbose, node_labels=args.node_labels, taints=args.register_with_taints)
    except (localrun.PlanError, ApiError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return localrun.EXIT_USAGE


# The distribution that carries Kubeflow's API models, which only `trainjobs import` reads.
IMPORT_MODELS = "kubeflow_trainer_api"


def cmd_import(args: argparse.Namespace) -> int:
    if importlib.util.find_spec(IMPORT_MODELS) is None:   # the importer imports them where it reads a manifest
        print("error: trainjobs import reads manifests with Kubeflow's API models, which are not installed: "
              "pip install 'trainjobs[import]'", file=sys.stderr)
        return 2
    from trainjobs.tools import importer   # imported here: only this command imports manifests
    from trainjobs.tools.importer import emit

    try:
        imported = importer.import_files(args.files, allow_dropped=args.allow_dropped, namespace=args.namespace)
    except importer.ImportFailed as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        if any("cannot be expressed" in problem for problem in exc.problems):
            print("error: nothing was imported; change the source, or pass --allow-dropped to import without the "
                  "fields named (each is then listed in the output)", file=sys.stderr)
        return 2
    for line in emit.findings_lines(imported):
        print(line, file=sys.stderr)
    print((emit.pulumi_yaml if args.to == "yaml" else emit.python)(imported, args.files), end="")
    return 0


def cmd_policy_pack(args: argparse.Namespace) -> int:
    from trainjobs.policy.directory import PackError, write_pack

    directory = Path(args.directory)
    try:
        written = write_pack(directory)
    except PackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the trainjobs policy pack to {directory}/ ({', '.join(written)}); enable it with:\n"
          f"  pulumi preview --policy-pack {directory}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="trainjobs", description=__doc__)
    top.add_argument("--version", action="version", version=f"trainjobs {__version__}")
    sub = top.add_subparsers(dest="command", required=True)

    def stack_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--stack", default="dev", help="stack whose Pulumi.<stack>.yaml config to use (default: dev)")
        p.add_argument("--stack-output", action="append", default=[], metavar="STACK:NAME=VALUE",
                       help="an output of another stack the program reads with a StackReference (YAML value; "
                            "repeatable); without it, such outputs are unknown in render and explain")
        p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config value (YAML value); repeatable")

    def echo_options(p: argparse.ArgumentParser) -> None:
        """How much of the pods' output the commands that run them echo."""
        p.add_argument("--quiet", action="store_true", help="do not echo the containers' output (logs are kept)")
        p.add_argument("--verbose", action="store_true",
                       help="echo every line, with sshd's connection messages and known harmless messages")

    def program_command(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument("program", help="Pulumi program file, e.g. stacks/__main__.py")
        stack_options(p)
        return p

    p = program_command("render", "write every Kubernetes object the program creates as YAML")
    p.add_argument("--out", help="output directory (default: rendered/<stack>)")
    p.set_defaults(func=cmd_render)
    p = program_command("explain", "print, per pod, its DNS names and the env it will really see")
    p.add_argument("--job", help="only this training job's pods (myjob) or one role's Job (myjob-node-0), "
                                 "whichever backend runs them")
    p.set_defaults(func=cmd_explain)
    p = program_command("run-local", "run the program's Jobs on this machine, each pod in its own namespaces "
                                     "(needs root)")
    p.add_argument("--job", action="append", default=[], metavar="NAME",
                   help="a Job (myjob-node-0) or a training job (myjob) to run; repeatable (default: every Job "
                        "this machine can run)")
    p.add_argument("--timeout", type=float, default=900, metavar="S",
                   help="stop everything and fail after S seconds (default: 900; 0: no limit)")
    p.add_argument("--grace", type=float, default=5, metavar="S",
                   help="longest grace period between SIGTERM and SIGKILL when pods are stopped (default: 5)")
    p.add_argument("--run-dir", metavar="DIR",
                   help="where the run's directory (logs, summary.json) is made (default: the temp dir)")
    p.add_argument("--disrupt", action="append", default=[], metavar="POD@WHEN",
                   help="evict the pod with this hostname as a preemption would (condition DisruptionTarget), "
                        "WHEN seconds after its containers start, or once it prints TEXT (POD@output:TEXT); "
                        "repeatable")
    p.add_argument("--admit", action="append", default=[], metavar="JOB=N",
                   help="run only the first N indexes of this Indexed Job, as Kueue admits part of a Job with "
                        "partial admission; repeatable")
    p.add_argument("--resize", action="append", default=[], metavar="JOB=N@WHEN",
                   help="set this running Indexed Job's parallelism and completions to N, as scaling an elastic "
                        "Job does, WHEN seconds after it starts or once one of its pods prints TEXT "
                        "(JOB=N@output:TEXT); a Job's resizes apply in the order given; repeatable")
    echo_options(p)
    p.set_defaults(func=cmd_run_local)
    p = sub.add_parser("node-agent", help="be the kubelet of Nodes in a real cluster: run the pods bound to them on "
                                          "this machine as run-local runs them, until stopped (needs root)")
    p.add_argument("--kubeconfig", metavar="PATH", help="the cluster's kubeconfig (default: $KUBECONFIG, else "
                                                        "~/.kube/config)")
    p.add_argument("--nodes", type=int, default=1, metavar="N", help="how many Nodes to register (default: 1)")
    p.add_argument("--node-prefix", default="run-local", metavar="NAME",
                   help="the Nodes are named NAME-0 ... NAME-<N-1> (default: run-local)")
    p.add_argument("--node-labels", action="append", default=[], metavar="KEY=VALUE,...",
                   help="labels added to the Nodes, as kubelet's flag of this name (e.g. team=ml); repeatable")
    p.add_argument("--register-with-taints", action="append", default=[], metavar="KEY=VALUE:EFFECT,...",
                   help="taints the Nodes are registered with, as kubelet's flag of this name (e.g. "
                        "dedicated=ml:NoSchedule: only pods that tolerate it are scheduled there); repeatable")
    p.add_argument("--grace", type=float, default=None, metavar="S",
                   help="longest grace period between SIGTERM and SIGKILL (default: each pod's own)")
    p.add_argument("--run-dir", metavar="DIR", help="where the agent's directory (logs) is made (default: the temp dir)")
    p.add_argument("--disrupt", action="append", default=[], metavar="POD@WHEN",
                   help="preempt the pod with this hostname as the kubelet does (condition DisruptionTarget, "
                        "reason TerminationByKubelet), WHEN seconds after its containers start, or once it prints "
                        "TEXT (POD@output:TEXT); repeatable")
    echo_options(p)
    p.set_defaults(func=cmd_node_agent)
    p = sub.add_parser("import", help="print the component call equivalent to a Kubeflow TrainJob (with its "
                                      "runtime), a training-operator v1 PyTorchJob, MPIJob, XGBoostJob or JAXJob, an "
                                      "MPI Operator MPIJob or a Volcano Job")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="YAML manifests: TrainJobs and the (Cluster)TrainingRuntimes they use (a built-in runtime "
                        "by name needs no file), training-operator v1 PyTorchJobs, MPIJobs, XGBoostJobs and JAXJobs "
                        "(kubeflow.org/v1), MPIJobs (kubeflow.org/v2beta1), Volcano Jobs")
    p.add_argument("--to", choices=("python", "yaml"), default="python",
                   help="python: a Pulumi Python program (default); yaml: a Pulumi YAML program")
    p.add_argument("--namespace", metavar="NS", help="namespace of the manifests that name none (as kubectl -n)")
    p.add_argument("--allow-dropped", action="store_true",
                   help="import even when fields cannot be expressed; each is listed in the output and on stderr")
    p.set_defaults(func=cmd_import)
    p = sub.add_parser("policy-pack", help="write the policy pack of this installed trainjobs into a directory, for "
                                           "pulumi preview --policy-pack DIR")
    p.add_argument("directory", metavar="DIR", help="where to write it (made if missing)")
    p.set_defaults(func=cmd_policy_pack)
    status.add_commands(sub, stack_options, _run)
    return top


def main(argv: list[str] | None = None) -> int:
    """Exit status 2 with `error: ...` for any bad input; a traceback only for a bug."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse's usage errors (2) and --help (0), returned so callers get a status
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.func(args)
    except (TrainJobError, ConfigError, pulumi.RunError, FileExistsError, FileNotFoundError) as exc:
        # pulumi.RunError (ConfigMissingError, ConfigTypeError, ...) is how a program stops with a message.
        for error in exc.errors if isinstance(exc, TrainJobErrors) else (exc,):   # every refused job
            print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:   # Ctrl-C ends `status --watch`, `logs --follow` and `wait`
        return 130
    except BrokenPipeError:   # the reader stopped early (`explain ... | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def entry() -> None:
    """The `trainjobs` command: `main`, then the process ends as soon as its output is out.

    Everything is written by then; the interpreter's teardown of pulumi's modules and threads would
    only add a quarter of a second or more to every render (measured in docs/performance.md).
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:   # the reader is gone; nothing more can reach it
        pass
    os._exit(code)


if __name__ == "__main__":
    entry()
