"""The errors of ``studio eval``, each with a stable code (printed as ``code: message``)."""

from __future__ import annotations

from typing import Final

INVALID_SUITE: Final = "invalid_suite"
UNKNOWN_BASE_COMMIT: Final = "unknown_base_commit"
FIXTURE_FAILED: Final = "fixture_failed"
UNKNOWN_EVAL_RUN: Final = "unknown_eval_run"
EVAL_MISMATCH: Final = "eval_mismatch"
INVALID_MATRIX: Final = "invalid_matrix"
# per item, stored as its error code
PATCH_FAILED: Final = "patch_failed"
GRADING_FAILED: Final = "grading_failed"
NO_REPLAY_SCRIPT: Final = "no_replay_script"
EXECUTION_NOT_FINISHED: Final = "execution_not_finished"


class EvalError(Exception):
    """A suite, a matrix or an eval run that cannot be used; nothing is run."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"
