"""One root error, one subclass per stage (serve/status and infer included), each with its own
``exit_code``: the exit-code table is ERROR_CLASSES here (exit_codes() lists it, with the codes that
are no error class). The CLI maps ``exit_code``; nothing else prints them."""

from __future__ import annotations


class TritonBuildError(Exception):
    """A user-facing failure: what happened, where, and how to fix it.

    Attributes:
        where: the place to look (``file:line``, a model name, a URL).
        hint: the fix, as an instruction.
    """

    exit_code = 1
    kind = "error"

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def to_dict(self) -> dict:
        return {
            "error": self.kind,
            "message": self.message,
            "where": self.where,
            "hint": self.hint,
            "exit_code": self.exit_code,
        }

    def located(self) -> str:
        """The message after its place, which is said once: a message that already starts with it
        (a SyntaxError's file:line:col) is not prefixed again."""
        if not self.where or self.message.startswith(f"{self.where}:"):
            return self.message
        return f"{self.where}: {self.message}"

    def __str__(self) -> str:
        head = self.located()
        return f"{head}\n  hint: {self.hint}" if self.hint else head


class UsageError(TritonBuildError):
    exit_code = 2
    kind = "usage"


class RecipeError(TritonBuildError):
    exit_code = 3
    kind = "recipe"


class PlanError(TritonBuildError):
    exit_code = 4
    kind = "plan"


class BuildError(TritonBuildError):
    exit_code = 5
    kind = "build"


class VerifyError(TritonBuildError):
    exit_code = 6
    kind = "verify"


class PublishError(TritonBuildError):
    exit_code = 7
    kind = "publish"


class ServerError(TritonBuildError):
    """serve and status: the server did not start, exited, cannot be reached, or is not live and ready."""

    exit_code = 8
    kind = "server"


class InferenceError(TritonBuildError):
    """infer: no such model or input on the server, a request refused, answers that differ from the goldens."""

    exit_code = 9
    kind = "infer"


class TuneError(VerifyError):
    """tune: no candidate meets the constraints (the report is still written)."""

    exit_code = 10
    kind = "tune"


class ServerStartError(VerifyError):
    """verify's own embedded server (or the environment it runs in) could not be made or started."""

    exit_code = 11
    kind = "server-start"


class PluginError(TritonBuildError):
    """A backend plug-in (an entry point of the ``tritonbuild.backends`` group) that could not be
    loaded or registered: its import failed, it is no Backend, or its name is taken."""

    exit_code = 12
    kind = "plugin"


# The exit-code table: one class per code (subclasses not listed here share their parent's code).
ERROR_CLASSES: tuple[type[TritonBuildError], ...] = (
    UsageError,
    RecipeError,
    PlanError,
    BuildError,
    VerifyError,
    PublishError,
    ServerError,
    InferenceError,
    TuneError,
    ServerStartError,
    PluginError,
)
OK, INTERNAL, INTERRUPTED = 0, 1, 130


def exit_codes() -> dict[int, str]:
    """Every exit code of the CLI → what it means (the docs' exit-code page is generated from
    this)."""
    table = {OK: "ok", INTERNAL: "internal bug (traceback shown, please report)"}
    table |= {cls.exit_code: cls.kind for cls in ERROR_CLASSES}
    return table | {INTERRUPTED: "interrupted (Ctrl-C)"}


class MultipleErrors(TritonBuildError):
    """Several independent user errors found in one pass (e.g. every bad recipe at once)."""

    def __init__(self, errors: list[TritonBuildError]):
        self.errors = errors
        first = errors[0]
        self.exit_code = first.exit_code
        self.kind = first.kind
        super().__init__("\n".join(str(e) for e in errors))

    def to_dict(self) -> dict:
        return {
            "error": self.kind,
            "exit_code": self.exit_code,
            "errors": [e.to_dict() for e in self.errors],
        }
