"""headflow study on S^1 and S^2: typed configs (errors name the TOML key), resume, Ctrl-C."""

import json
import re

import numpy as np
import pytest
import xarray as xr

from headflow import cli

S2 = """
[model]
kind = "usa"
d = 3
beta = 1.0
lambdas = [1.0]
[study]
n_values = [8, 16]
n_seeds = 2
t1 = 0.1
n_saves = 2
m_grid = 64
dt = 0.05
n_reference = 64
n_projections = 8
[density]
family = "expression"
expression = "1 + 0.5 * x3"
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_study_on_the_sphere_runs_and_resumes(tmp_path, capsys, monkeypatch):
    cfg = _write(tmp_path, "s2.toml", S2)
    out = tmp_path / "s2.nc"
    assert cli.main(["study", cfg, "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"rate\s+-?\d\.\d{3} \[", printed)  # the slope with its interval
    with xr.open_dataset(out) as ds:
        assert ds.sw2.dims == ("n_particles", "seed", "time") and ds.attrs["rate_metric"] == "sw2"
        assert "sw2_stderr" in ds and ds.attrs["sampling"] == "independent"
        first = ds.load()
    assert len(list((tmp_path / "s2.nc.cells").glob("cell_*.nc"))) == 4
    # a rerun after the output is lost computes no cell: everything loads from the store
    out.unlink()
    import metrics._studies.spec

    monkeypatch.setattr(metrics._studies.spec, "simulate", _forbidden_cell_simulate(metrics._studies.spec.simulate))
    assert cli.main(["study", cfg, "--out", str(out), "--no-progress"]) == 0
    out_text = capsys.readouterr().out
    assert "holds 4 finished cell file(s)" in out_text and "(0 cell(s) computed)" in out_text
    with xr.open_dataset(out) as ds:
        np.testing.assert_array_equal(ds.sw2.values, first.sw2.values)


def _forbidden_cell_simulate(real):
    """simulate for the reference runs only (N > 64 is not a cell here)."""
    def simulate(x0, *args, **kwargs):
        assert len(x0) == 64, "a cell was recomputed although it is in the store"
        return real(x0, *args, **kwargs)
    return simulate


def test_ctrl_c_leaves_a_resumable_store(tmp_path, capsys, monkeypatch):
    import metrics._studies.spec

    cfg = _write(tmp_path, "s2.toml", S2)
    out = tmp_path / "s2.nc"
    real = metrics._studies.spec.simulate
    calls = []

    def interrupted_after_two_cells(x0, *args, **kwargs):
        if len(x0) != 64:  # a cell, not the reference
            calls.append(len(x0))
            if len(calls) == 3:
                raise KeyboardInterrupt
        return real(x0, *args, **kwargs)

    monkeypatch.setattr(metrics._studies.spec, "simulate", interrupted_after_two_cells)
    assert cli.main(["study", cfg, "--out", str(out), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert "interrupted; 2 finished cell file(s) are kept in" in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.rglob("*.part*"))
    calls.clear()
    monkeypatch.setattr(metrics._studies.spec, "simulate", real)
    assert cli.main(["study", cfg, "--out", str(out), "--no-progress"]) == 0
    assert "holds 2 finished cell file(s)" in capsys.readouterr().out


BAD_STUDY = [
    ("[study]\nn_values = [16, \"64\"]\n", r"\[study\]\.n_values\[1\] must be an integer in \[1, inf\); got '64' "
                                           r"\(str\)\. Write 64 without quotes"),
    ("[study]\nn_values = \"16, 32\"\n", r"\[study\]\.n_values must be a sequence .*; got '16, 32' \(str\)"),
    ("[study]\nn_values = [32, 16]\n", r"\[study\]\.n_values .* strictly increasing"),
    ("[study]\nn_values = [16]\n", r"\[study\]\.n_values .* at least 2"),
    ("[study]\nn_values = [0, 16]\n", r"\[study\]\.n_values\[0\] must be an integer in \[1, inf\); got 0"),
    ("[study]\nn_values = [16.5, 32]\n", r"\[study\]\.n_values\[0\] must be an integer .*; got 16.5 \(float\)"),
    ("[study]\nn_seeds = \"4\"\n", r"\[study\]\.n_seeds must be an integer in \[1, inf\) or a sequence of at "
                                     r"least 1 values, each an integer in \[1, inf\); got '4' \(str\)\. Write 4 "
                                     r"without quotes"),
    ("[study]\nn_seeds = 0\n", r"\[study\]\.n_seeds must be an integer in \[1, inf\).*; got 0"),
    ("[study]\nt1 = -1.0\n", r"\[study\]\.t1 must be a real number in \(0, inf\); got -1.0"),
    ("[study]\nt1 = true\n", r"\[study\]\.t1 must be a real number in \(0, inf\); got True \(bool\)"),
    ("[study]\ndt = nan\n", r"\[study\]\.dt must be a real number in \(0, inf\); got nan"),
    ("[study]\ndt = 5.0\n", r"\[study\] dt = 5.0 must be <= t1"),
    ("[study]\nkappa = -inf\n", r"\[study\]\.kappa must be a real number in \(0, inf\) or inf; got -inf"),
    ("[study]\nm_grid = 4\n", r"\[study\]\.m_grid must be an integer in \[8, inf\); got 4"),
    ("[study]\nsampling = \"paired\"\n", r"\[study\]\.sampling must be one of 'independent', 'nested'; got 'paired'"),
    ("[study]\nengine = \"threads\"\n", r"\[study\]\.engine must be one of 'serial', 'process'.*; got 'threads'"),
    ("[study]\nmax_workers = 0\n", r"\[study\]\.max_workers must be None or an integer in \[1, inf\); got 0"),
    ("[study]\nstore = 3\n", r"\[study\]\.store must be a non-empty string; got 3 \(int\)"),
    ("[study]\nn_reference = 1.5\n", r"\[study\]\.n_reference must be None or an integer in \[2, inf\); "
                                       r"got 1.5 \(float\)"),
    ("[study]\nseed = -1\n", r"\[study\]\.seed must be an integer in \[0, inf\); got -1"),
    ("[study]\nnvalues = [1, 2]\n", r"unknown key\(s\) \['nvalues'\] in \[study\]"),
    ("[model]\nkind = \"relu\"\n", r"\[model\] kind = 'relu': the study needs \"usa\" or \"softmax\""),
    # the mean-field reference solves the standard flow on the sphere: another flow would be measured against it
    ("[model]\ncausal = true\n", r"\[model\] causal = true: the study measures the particles against the mean-field "
                                 r"reference, which solves the standard flow on the sphere .*Remove \[model\] causal"),
    ("[model]\ngeometry = \"flat\"\n", r"\[model\] geometry = \"flat\": the study .*Remove \[model\] geometry"),
    ("[model]\nupdate = \"ngpt\"\n", r"\[model\] update = \"ngpt\": the study .*Remove \[model\] update"),
    ("[model]\nbeta = \"3\"\n", r"\[model\]\.beta must be a real number in \[0, inf\); got '3' \(str\)\. "
                                  r"Write 3 without quotes"),
    ("[model]\nlambdas = 1.0\n", r"\[model\]\.lambdas must be a sequence .*; got 1.0 \(float\)"),
    ("[model]\nd = 1\n", r"\[model\]\.d must be an integer in \[2, inf\); got 1"),
    ("[model]\nM = [[1, \"a\"], [0, 1]]\n", r"\[model\]\.M must be a square matrix.*Its entry \[0\]\[1\] is 'a'"),
    ("[density]\namplitude = 2.0\n", r"\[density\]\.amplitude must be a real number in \[0, 1\); got 2.0"),
    ("[density]\namplitude = 1.0\n", r"\[density\]\.amplitude must be a real number in \[0, 1\); got 1.0"),
    ("[density]\nmode = 1.5\n", r"\[density\]\.mode must be an integer in \[0, inf\); got 1.5 \(float\)"),
    ("[density]\nfamily = \"gauss\"\n", r"\[density\]\.family must be one of .*; got 'gauss'"),
    ("[density]\nfamily = \"von_mises\"\n", r"\[density\] family = 'von_mises' needs concentration"),
    # a key of another family would be ignored
    ("[density]\nfamily = \"von_mises\"\nconcentration = 2.0\namplitude = 0.5\n",
     r"\[density\] amplitude is a key of family = 'cosine', but family = 'von_mises' takes only concentration: it "
     r"would be ignored\. Remove amplitude, or set the family it belongs to"),
    ("[density]\nconcentration = 2.0\n", r"\[density\] concentration is a key of family = 'von_mises', but family = "
                                         r"'cosine' \(the default\) takes only amplitude, mode"),
    ("[density]\nfamily = \"uniform\"\nmode = 2\n", r"family = 'uniform' takes no other key"),
    ("[density]\nfamily = \"expression\"\nexpression = \"1 + x1\"\nmode = 2\n",
     r"mode is a key of family = 'cosine', but family = 'expression' takes only expression"),
    ("[density]\nfamily = \"expression\"\n", r"\[density\] family = \"expression\" needs expression"),
    ("[density]\nfamily = \"expression\"\nexpression = \"__import__('os').system('x')\"\n",
     r"\[density\] expression: .*the function .*__import__.* is not allowed"),
    ("[density]\nfamily = \"expression\"\nexpression = \"x1.real\"\n", r"\[density\] expression: .*Attribute"),
    ("[density]\nfamily = \"expression\"\nexpression = \"1 + x3\"\n", r"\[density\] expression: .*unknown name 'x3'"),
    ("[density]\nfamily = \"expression\"\nexpression = \"x1\"\n", r"\[density\] expression: .*non-negative"),
    ("[density]\nfamily = \"expression\"\nexpression = \"1 +\"\n", r"\[density\] expression: .*not an arithmetic"),
    ("[density]\nfamily = \"expression\"\nexpression = \"9**9**9\"\n", r"\[density\] expression: .*finite"),
    ("[output]\nformat = \"hdf\"\n", r"\[output\]\.format must be one of 'netcdf', 'zarr'; got 'hdf'"),
    ("[study]\nn_values = [\n", "not valid TOML"),
]


@pytest.mark.parametrize("text, match", BAD_STUDY)
def test_bad_study_configs_name_the_key(tmp_path, capsys, text, match):
    cfg = _write(tmp_path, "bad.toml", text)
    assert cli.main(["study", cfg, "--out", str(tmp_path / "x.nc"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("headflow study: error:") and "Traceback" not in err
    assert re.search(match, err), err
    assert not (tmp_path / "x.nc").exists() and not (tmp_path / "x.nc.cells").exists()


def test_the_keys_of_each_density_family_are_read_from_the_library(monkeypatch):
    """The [density] rule is FamilyDensity.FAMILIES: a key a family declares is accepted with it."""
    from headflow._config import ConfigError, load_config
    from metrics import FamilyDensity

    text = "[density]\nfamily = \"von_mises\"\nconcentration = 2.0\namplitude = 0.5\n"
    with pytest.raises(ConfigError, match="amplitude is a key of family = 'cosine'"):
        load_config("study", text)
    monkeypatch.setitem(FamilyDensity.FAMILIES, "von_mises", ("concentration", "amplitude"))
    assert load_config("study", text)["density"]["amplitude"] == 0.5


@pytest.mark.parametrize("command, text, match", [
    ("simulate", "[run]\nn = \"64\"\n", r"\[run\]\.n must be an integer in \[1, inf\); got '64' \(str\)\. "
                                        r"Write 64 without quotes"),
    ("simulate", "[run]\npositions = 1\n", r"\[run\]\.positions must be True or False; got 1 \(int\)"),
    ("simulate", "[run]\nmethod = \"rk5\"\n", r"\[run\]\.method must be one of .*; got 'rk5'"),
    ("sweep", "[sweep]\ngrid = { n_particles = [4, \"8\"] }\n", r"\[sweep\]\.grid\['n_particles'\] values must each "
                                                             r"be an integer in \[1, inf\); got '8'"),
    ("sweep", "[sweep]\ngrid = { temperature = [1.0] }\n", r"\[sweep\]\.grid has unknown key\(s\) \['temperature'\]"),
    ("sweep", "[sweep]\nmetrics = [\"energy\"]\n", r"\[sweep\]\.metrics\[0\] must be one of .*; got 'energy'"),
])
def test_other_commands_are_typed_too(tmp_path, capsys, command, text, match):
    cfg = _write(tmp_path, "bad.toml", text)
    assert cli.main([command, cfg, "--out", str(tmp_path / "x.nc"), "--no-progress"]) == 2
    assert re.search(match, capsys.readouterr().err)


def test_schema_choices_match_the_library():
    import metrics
    import particles

    types = cli.TYPES
    assert set(types["simulate"]["run"]["method"].choices) == set(particles.STEPPERS)
    assert set(types["sweep"]["sweep"]["method"].choices) == set(particles.STEPPERS)
    assert set(types["simulate"]["model"]["kind"].choices) == set(particles.KINDS)
    assert set(types["sweep"]["sweep"]["metrics"].item.choices) == set(metrics.METRICS)
    for command, sections in cli.SCHEMAS.items():
        for section, keys in sections.items():
            assert set(cli.TYPES[command][section]) == set(keys), (command, section)


def test_example_configs_are_recorded(tmp_path):
    for command in ("simulate", "sweep", "study"):
        cfg = cli.load_config(command, cli.EXAMPLES[command])
        json.dumps(cli._public(cfg), default=str)  # every value is plain data


def test_progress_bar_shows_rounded_times(tmp_path, capsys):
    """Time advances by float steps (0.1 + 0.1 + ...): the bar shows 4 significant digits."""
    cfg = _write(tmp_path, "run.toml", "[model]\nd = 2\n[run]\nn = 4\nt1 = 1.0\ndt = 0.1\nn_saves = 2\n")
    assert cli.main(["simulate", cfg, "--out", str(tmp_path / "run.nc")]) == 0
    err = capsys.readouterr().err
    assert "t = 1/1" in err and not re.search(r"\d\.\d{6,}", err), err


@pytest.mark.parametrize("option", [{"causal": True}, {"geometry": "flat"}, {"update": "post_ln"}])
def test_the_library_study_refuses_a_flow_its_reference_does_not_solve(option):
    import metrics
    import particles

    model = particles.MultiHead.scalar([1.0], d=2, beta=1.0, kind="usa", **option)
    rho = metrics.FamilyDensity("cosine", 2, amplitude=0.5, mode=2)
    with pytest.raises(particles.InvalidParameterError, match=r"'model' parameter of mean_field_limit_study .*the "
                       r"standard update on the sphere without a causal mask \(causal=False, geometry='sphere', "
                       r"update='standard'\)"):
        metrics.mean_field_limit_study(model, rho, n_values=(8, 16), t1=0.1, dt=0.05, progress=False)


def test_one_seed_prints_na_and_says_why(tmp_path, capsys):
    """n_seeds = 1 has no spread to measure: the table says n/a with its reason, never nan."""
    text = ("[model]\nkind = \"usa\"\nd = 2\nbeta = 1.0\nlambdas = [1.0]\n[study]\nn_values = [16, 32]\nn_seeds = 1\n"
            "t1 = 0.1\nn_saves = 2\nm_grid = 64\ndt = 0.05\n")
    cfg = _write(tmp_path, "one.toml", text)
    assert cli.main(["study", cfg, "--out", str(tmp_path / "one.nc"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out
    assert re.search(r"\n16 +[0-9.]+ ± n/a ", out) and re.search(r"\nrate +-?[0-9.]+ \[n/a\]", out)
    assert "n/a: not available: an error bar needs at least 2 seeds at that n, and a rate interval at least 2 " \
           "seeds at every n (n_seeds >= 2)" in out
    with xr.open_dataset(tmp_path / "one.nc") as ds:  # the dataset says it too, beside its NaN
        assert np.isnan(ds.w1_stderr).all() and "one seed" in ds.w1_stderr.attrs["comment"]
        assert np.isnan(ds.rate_w1_ci).all() and "one seed" in ds.rate_w1_ci.attrs["comment"]


def test_the_table_without_nans_has_no_footnote():
    import metrics

    g = np.array([[[0.10], [0.12]], [[0.05], [0.06]]])
    ds = xr.Dataset({"w1": (("n_particles", "seed", "time"), g),
                     "w1_stderr": (("n_particles", "time"), [[0.01], [0.005]]),
                     "rate_w1": (("time",), [-0.5]), "rate_w1_ci": (("time", "bound"), [[-0.6, -0.4]])},
                    coords={"n_particles": [100, 400], "time": [0.0]})
    assert "n/a" not in metrics.limit_study_table(ds)
    ds["rate_w1_ci"][:] = np.nan
    rate, note = metrics.limit_study_table(ds).splitlines()[-2:]
    assert rate.split() == ["rate", "-0.500", "[n/a]"] and note.startswith("n/a: not available: ")
