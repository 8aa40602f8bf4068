"""Unit-test Pulumi programs and components offline: run them under mocks, inspect what they register.

    from trainjobs.testing import run

    def test_my_stack():
        stack = run(lambda: TorchTrainJob("llm", {"image": "my/image:1", "num_nodes": 4}))
        job = stack.get("Job", "llm-node-0")
        assert job.manifest["spec"]["completions"] == 4

`run_program("stacks/__main__.py", stack="dev")` runs a whole program with its stack config;
`attempt(...)` returns a program's error with what it registered before it. With pytest, the
`pulumi_stack` fixture (see `trainjobs.testing.pytest_plugin`) does the same, and
`trainjobs.testing.checks.manifest_problems` checks rendered objects.
"""

from trainjobs.tools.engine import RegisteredResource, Secret, StackResult, attempt, run, run_program

__all__ = ["RegisteredResource", "Secret", "StackResult", "attempt", "run", "run_program"]
