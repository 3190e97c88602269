r"""The study kit: what a study built on headflow uses, public beside ``particles.extend`` and
``meanfield.extend``.

A study is a :class:`Study` (its cell, the fields of its cells' keys, the Dataset kind it makes),
a frozen :class:`StudySettings` dataclass and a function that runs its cells through
:func:`metrics.run_sweep`'s verified, resumable machinery and assembles one Dataset. The settings
are one table: each field is a :func:`setting` with its rule (a :mod:`particles.validation`
constraint), its default and, when the cells depend on it, its name in the cells' key (so a store
written by one version is found by the next); :meth:`StudySettings.config` is the ``config`` attr
of the Dataset. :func:`study_function` makes the public function from the table (its parameters,
their defaults and its declaration); the cells receive the settings object. A field marked
``setting(rule, values, axis=True)`` is a grid axis (β, n, any setting): :meth:`Study.run` runs every
grid point x seed, each cell on the typed settings of its point (the model rebuilt at its β, d or head
strengths), keyed by the model it runs, and ``ds.attn.plot()`` draws the study over its grid.

The kit
    :class:`Study`, :class:`StudySettings`, :func:`setting`, :func:`study_function`;
    :func:`run_cell` (one particle run of a cell, saving a function's columns), :func:`cell_rngs`,
    :func:`particle_method`, :func:`seed_counts`;
    :func:`study_coords`, :func:`cluster_variables`, :func:`study_attrs` (the coordinates,
    cluster variables and attrs with provenance every study shares);
    :func:`cluster_row` (a save function's cluster columns), :func:`saved_to_dataset`;
    :func:`model_key`, :func:`density_key`, :func:`exact_arccos`, :func:`canonical_float`
    (key fields from the configuration alone: the same names on every machine);
    :data:`STANDARD_FLOW`, :func:`standard_flow` (the MultiHead options of the flow the mean-field
    references solve: a study against them takes no other).

docs/guide/studies.md has a whole study written with the kit.

>>> import dataclasses
>>> from particles.validation import Interval
>>> @dataclasses.dataclass(frozen=True)
... class Settings(StudySettings):
...     t1: float = setting(Interval(0, None, closed="neither"), 1.0)
...     eps: float = setting(Interval(0, None, closed="neither"), 1e-3, key=True)
>>> Settings(t1=2.0).key(), Settings(t1=2.0).config()
({'eps': 0.001}, {'t1': 2.0, 'eps': 0.001})
>>> Settings(eps=-1.0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
particles.validation.InvalidParameterError: The 'eps' parameter of Settings must be a real number in (0, inf); ...
"""

from __future__ import annotations

from ._observables.clustering import cluster_row
from ._runs.cells import saved_to_dataset
from ._runs.keys import canonical_float, density_key, exact_arccos, model_key
from ._runs.params import STANDARD_FLOW, standard_flow
from ._studies.spec import (
    Study,
    StudySettings,
    cell_rngs,
    cluster_variables,
    particle_method,
    run_cell,
    seed_counts,
    setting,
    study_attrs,
    study_coords,
    study_function,
)

__all__ = ["Study", "StudySettings", "setting", "study_function", "run_cell", "cell_rngs", "particle_method",
           "seed_counts", "study_coords", "cluster_variables", "study_attrs", "cluster_row", "saved_to_dataset",
           "model_key", "density_key", "exact_arccos", "canonical_float", "STANDARD_FLOW", "standard_flow"]
