"""The library's error and warning classes (every layer raises these)."""

__all__ = ["InvalidParameterError", "SolverError", "ConvergenceWarning", "StabilityWarning", "LIBRARY_ERRORS"]


class InvalidParameterError(ValueError, TypeError):
    """Bad user input. Subclasses both ``ValueError`` and ``TypeError`` so either
    ``except`` clause catches it (scikit-learn's convention)."""


class SolverError(RuntimeError):
    """The numerical state stopped being finite, or a solver could not proceed."""


class ConvergenceWarning(UserWarning):
    """An iterative method stopped before reaching its tolerance."""


class StabilityWarning(UserWarning):
    """A fixed step lies outside its method's stability interval at a rate the flow reaches: the numerical
    solution near that state moves away from it where the flow converges."""


#: what a caller catches to tell a headflow refusal from a bug
LIBRARY_ERRORS = (InvalidParameterError, SolverError)

# tracebacks and reprs name the public home of the classes, not this private module
for _cls in (InvalidParameterError, SolverError, ConvergenceWarning, StabilityWarning):
    _cls.__module__ = "particles.validation"
del _cls
