r"""The study kit: what a study built on headflow uses, public beside ``particles.extend`` and
``meanfield.extend``.

A study is a :class:`Study` (its cell, the fields of its cells' keys, the Dataset kind it makes)
and a function that runs its cells through :func:`metrics.run_sweep`'s verified, resumable
machinery and assembles one Dataset. Its settings are a frozen :class:`StudySettings` dataclass:
the fields are typed once, :attr:`StudySettings.KEY_FIELDS` lists explicitly those that enter the
cells' keys (so a store written by one version is found by the next), and
:meth:`StudySettings.config` is the ``config`` attr of the Dataset. The cells receive the settings
object as ``settings["study"]``.

The kit
    :class:`Study`, :class:`StudySettings`;
    :func:`run_cell` (one particle run of a cell, saving a function's columns),
    :func:`particle_method`, :func:`seed_counts`;
    :func:`study_coords`, :func:`cluster_variables`, :func:`study_attrs` (the coordinates,
    cluster variables and attrs with provenance every study shares);
    :func:`cluster_row` (a save function's cluster columns), :func:`saved_to_dataset`;
    :func:`model_key`, :func:`density_key`, :func:`exact_arccos`, :func:`canonical_float`
    (key fields from the configuration alone: the same names on every machine).

docs/guide/studies.md has a whole study written with the kit.

>>> import dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Settings(StudySettings):
...     KEY_FIELDS = ("eps",)
...     t1: float = 1.0
...     eps: float = 1e-3
>>> Settings(t1=2.0).key(), Settings(t1=2.0).config()
({'eps': 0.001}, {'t1': 2.0, 'eps': 0.001})
"""

from __future__ import annotations

from ._observables.clustering import cluster_row
from ._runs.cells import saved_to_dataset
from ._runs.keys import canonical_float, density_key, exact_arccos, model_key
from ._studies.spec import (
    Study,
    StudySettings,
    cluster_variables,
    particle_method,
    run_cell,
    seed_counts,
    study_attrs,
    study_coords,
)

__all__ = ["Study", "StudySettings", "run_cell", "particle_method", "seed_counts", "study_coords",
           "cluster_variables", "study_attrs", "cluster_row", "saved_to_dataset", "model_key", "density_key",
           "exact_arccos", "canonical_float"]
