"""pytest fixtures for testing Pulumi stacks that use trainjobs components.

Loaded automatically when trainjobs is installed (entry point `pytest11`).
"""

import pytest

from . import run, run_program


@pytest.fixture
def pulumi_stack():
    """Call with a program callable (or a program path) to run it under mocks.

        def test_nodes(pulumi_stack):
            stack = pulumi_stack(lambda: TorchTrainJob("a", {"image": "i", "num_nodes": 2}))
            assert stack.get("Job", "a-node-0").manifest["spec"]["parallelism"] == 2
    """

    def runner(program, **kwargs):
        if callable(program):
            return run(program, **kwargs)
        return run_program(program, **kwargs)

    return runner
