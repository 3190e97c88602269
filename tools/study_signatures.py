"""A griffe extension for the API pages: a study's public function shows the parameters its settings table
gives it (``metrics.extend.study_function``), not the ``(settings, **run)`` of the function it wraps."""

from __future__ import annotations

import importlib
import inspect

import griffe

_KINDS = {inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
          inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only}


class StudySignatures(griffe.Extension):
    """Replace the parameters of functions decorated with ``study_function`` by their runtime signature."""

    def on_function_instance(self, *, node, func: griffe.Function, agent, **kwargs) -> None:
        if not any("study_function" in str(d.value) for d in func.decorators):
            return
        public = getattr(importlib.import_module(func.module.path), func.name)
        func.parameters = griffe.Parameters(*(
            griffe.Parameter(p.name, kind=_KINDS[p.kind],
                             default=None if p.default is inspect.Parameter.empty else repr(p.default))
            for p in inspect.signature(public).parameters.values()))
