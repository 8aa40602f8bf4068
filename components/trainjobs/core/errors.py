"""Validation errors raised before any resource registers."""

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterator

from pulumi.errors import RunError

from trainjobs.kube.naming import shown

__all__ = ["Issue", "IssueCollector", "TrainJobError", "TrainJobErrors", "collecting_errors", "shown"]


@dataclass(frozen=True)
class Issue:
    """One problem with one argument: `field` is the argument path, `message` says what to do."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class TrainJobError(ValueError, RunError):
    """A job's arguments cannot produce a working job.

    Raised by a component's constructor before it registers anything, so a failed
    `pulumi up` or `trainjobs render` leaves no partial job behind. As a Pulumi RunError,
    `pulumi up` prints its message without a stack trace.
    """

    def __init__(self, component: str, name: str | None, issues: list[Issue]):
        self.component = component
        self.name = name
        self.issues = tuple(issues)
        lines = "\n".join(f"  - {issue}" for issue in self.issues)
        subject = component if name is None else f'{component} "{name}"'
        super().__init__(f"{subject}: invalid arguments\n{lines}")


class IssueCollector:
    """Gathers every problem of one job so the user sees them all at once."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []

    def add(self, field: str, message: str) -> None:
        self.issues.append(Issue(field, message))

    def raise_if_any(self, component: str, name: str) -> None:
        if self.issues:
            raise TrainJobError(component, name, self.issues)


class TrainJobErrors(ValueError, RunError):
    """Several jobs of one program refused: each job's TrainJobError, in the order the program made them."""

    def __init__(self, errors: list[TrainJobError]):
        self.errors = tuple(errors)
        super().__init__("\n".join(str(error) for error in self.errors))


# While set, each job refused by its arguments is recorded here, with the refusals whose jobs are skipped (they
# register nothing and the program goes on) rather than raised, so an offline run can report every bad job.
_COLLECTED: ContextVar[tuple[list[TrainJobError], frozenset[str]] | None] = ContextVar(
    "trainjobs_collected_errors", default=None)


@contextmanager
def collecting_errors(skip: frozenset[str] = frozenset()) -> Iterator[list[TrainJobError]]:
    """Within the block, components record their TrainJobError (`refused`) and raise it, as under the
    engine, unless its text is in `skip`: then the job registers nothing and the program goes on."""
    collected: list[TrainJobError] = []
    token = _COLLECTED.set((collected, skip))
    try:
        yield collected
    finally:
        _COLLECTED.reset(token)


def refused(error: TrainJobError) -> bool:
    """Record `error` when errors are being collected; True when the caller skips its job and goes on, False
    when it raises the error."""
    collecting = _COLLECTED.get()
    if collecting is None:
        return False
    collected, skip = collecting
    collected.append(error)
    return str(error) in skip
