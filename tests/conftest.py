import pytest

from trainjobs.testing import run


@pytest.fixture
def render_job():
    """Run a single component under mocks; return the StackResult."""

    def _render(component_cls, name, args, **kwargs):
        return run(lambda: component_cls(name, args, **kwargs))

    return _render
