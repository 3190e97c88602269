"""What each row of docs/reproductions.md states, where it comes from, and which table it belongs to.

``SOURCES`` names the arXiv id of every reference tag; docs/theory.md must give the same ids (a test
cross-checks them). ``ROW_TEXT`` gives, per row key: the table (``published`` or ``consistency``),
the source tag, the locator in the paper and whether the statement was located in the paper's own
text (``False``: only an abstract or a public summary was available, and the verdict column says
"could not be located exactly"), the statement (for a consistency check: the identity it checks) and,
for a control, what it changes.
"""

from __future__ import annotations

from typing import NamedTuple

#: reference tag -> (authors, arXiv id); the same ids as docs/theory.md's references
SOURCES = {
    "P": ("Gradient Flow Structure and Quantitative Dynamics of Multi-Head Self-Attention", "2605.04279"),
    "GLPR": ("Geshkovski, Letrouit, Polyanskiy, Rigollet", "2312.10794"),
    "R": ("Rigollet", "2512.01868"),
    "PRY": ("Polyanskiy, Rigollet, Yao", "2507.22857"),
    "CLPR": ("Chen, Lin, Polyanskiy, Rigollet", "2510.05554"),
    "BRCPL": ("Bruno, Rigollet, Chen, Polyanskiy, Lin", "2605.08505"),
    "GRR": ("Geshkovski, Rigollet, Ruiz-Balet", "2411.04551"),
    "KPR": ("Karagodin, Polyanskiy, Rigollet", "2411.04990"),
    "BPA": ("Bruno, Pasqualotto, Agazzi", "2410.23228"),
    "GKPR": ("Geshkovski, Koubbi, Polyanskiy, Rigollet", "2410.06833"),
}


class Text(NamedTuple):
    """What a row states. ``shares``: the code path or equation that its prediction and its measurement share
    (the equation headflow integrates, a reduction of it by symmetry, or the same closed form), or "";
    ``reading``: the statement is this page's own reading of the source, not the source's statement."""

    tag: str
    locator: str
    located: bool
    statement: str
    shares: str = ""
    reading: bool = False

    @property
    def table(self) -> str:
        """THE RULE of the split: a consistency check when the prediction and the measurement share a code path or
        an equation headflow integrates (reductions by symmetry included), or when the statement is the page's
        own reading; a published reproduction otherwise."""
        return "consistency" if self.shares or self.reading else "published"


_SUMMARY = ("Thm {}; v2 (8 May 2026) abstract read: it states {} in words; the theorem's text and formula were not "
            "found in public material")
_P19, _P22 = (_SUMMARY.format(19, "a closed-form critical inverse temperature"),
             _SUMMARY.format(22, "super-additive clustering rates"))
_P25 = _SUMMARY.format(25, "a ReLU/softmax separation of the linearised clustering time")
_P27 = _SUMMARY.format(27, "that attention entropy rises monotonically")
_BRCPL = ("v1 abstract (Bruno, Chen, Lin, Polyanskiy, Rigollet): β*_n ≍ n^{2/(d−1)} for uniform keys on the "
          "sphere; the top-weight-1/2 criterion is ours")
_R_ABSTRACT = "v1 abstract read: it states that normalisation alters contraction speeds, not the rate"
_EQUIANGULAR = "the equiangular ODE headflow integrates (the particles follow it by symmetry)"
ROW_TEXT = {
    "thm19_golden": Text("P", _P19, False,
                         r"\(\cos\angle(f_i,x_i) = c^*(2) = 1/\varphi\) at \(\beta = \beta^*\): "
                         r"\(\beta^*\) is *defined* so that this cosine is \(c^*\)",
                         shares="the definition of β* in particles.theory"),
    "thm19_beta_star": Text("P", _P19, False,
                            r"the radial-dominance margin (Condition 8) changes sign at \(\beta^*\), the same "
                            "definition read through the margin", shares="the definition of β* in particles.theory"),
    "thm22_early": Text("P", _P22, False,
                        r"\(\dot\rho(0) = \sum_h\varphi(\lambda_h)\): the velocity field evaluated at orthogonal "
                        "tokens", shares="the velocity field at orthogonal tokens"),
    "thm27_entropy": Text("P", _P27,
                          False,
                          r"equiangular tokens: the attention entropy is the closed form \(H(\rho)\) at the run's "
                          r"own overlap, so it rises to \(\log n\) because \(\rho\) rises", shares=_EQUIANGULAR),
    "clpr_gamma_c": Text("CLPR", "v1 abstract read: it states the critical scaling β_n ≍ log n, not this closed form",
                         False,
                         r"self-weight \(q = 1/(1+(n-1)n^{-\gamma(1-\rho)})\) crosses 1/2 at "
                         r"\(\gamma = \frac{\log(n-1)}{\log n}\frac1{1-\rho}\to\gamma_c = 1/(1-\rho)\)",
                         shares="the softmax weight of equiangular tokens (a closed form of it)"),
    "grr_cap": Text("GRR", "parameters of our choosing; v3 abstract read (it does not state this)", False,
                    r"collapse from a cap of radius 0.4π: \(t(\varepsilon)\) has slope 1 in "
                    r"\(\log(1/\varepsilon)\), the rate of the linearisation at the collapsed state",
                    shares="the linearisation of the flow headflow integrates", reading=True),
    "noise_threshold": Text("R", "[reconstructed; a standard computation, cf. R]; arXiv:2606.05140 (Mun, "
                            "Rosenzweig; v1 abstract read) states the linear-stability threshold for the USA "
                            "kernel, not this softmax "
                            "row's", False,
                            r"noisy uniform measure on S¹: mode 1 grows at the closed-form rate "
                            r"\(\sigma_1(\kappa)\) of `meanfield.stability`, stable iff "
                            r"\(\kappa<\kappa^* = aZ_0/(\mu I_1(a))\)",
                            shares="the linearisation of the noisy mean-field equation meanfield integrates"),
    "thm22_late": Text("P", _P22, False,
                       r"late rate \(1-\rho\sim Ce^{-2\Lambda t}\), \(\Lambda = \sum_h\lambda_h\)",
                       shares="the linearisation of " + _EQUIANGULAR),
    "thm25_relu": Text("P", _P25, False,
                       r"ReLU: \(T\approx n\log(1/\rho_0)/(2\beta\sum_h\lambda_h^2)\) as \(\rho_0\to0\): the "
                       r"cost of one decade of \(\rho_0\) tends to \(n\ln 10/(2\beta)\) (measured down the "
                       "decades, extrapolated)"),
    "thm25_relu_ode": Text("P", _P25, False,
                           r"the first decade's cost is the exact integral of the equiangular ODE (its linearisation "
                           "is the alternative)", shares=_EQUIANGULAR),
    "bpa_mode": Text("BPA", "Thm 4.3 and Fig. 4 (v1): the abstract states the mode maximising a rescaling of "
                     "Gegenbauer polynomials; the Fig. 4 caption (as quoted by a public review) shows the 3-periodic "
                     "state at β = 5", True,
                     r"from uniform tokens the most unstable mode of the linearised mean field grows at its rate "
                     r"\(\sigma_l\) (l = 3 at β = 5), as n → ∞ (measured along n, extrapolated)"),
    "gkpr_jump1": Text("GKPR", "v1 abstract read: it states the staircase profile, not the jumps' value", False,
                       r"first merge: the energy jumps by \(2m_am_b\) as β → ∞ (measured along β, extrapolated)"),
    "gkpr_jump2": Text("GKPR", "v1 abstract read: it states the staircase profile, not the jumps' value", False,
                       r"second merge: the same law"),
    "pry_nonsync_threshold": Text("PRY", "v1 abstract read: it states the bound −2/3 for global "
                                  "synchronisation, not the 3-cluster state's stability", False,
                                  r"the equal 3-cluster state is linearly stable exactly for β < −2/3", reading=True,
                                  shares="the Jacobian of the circle field headflow integrates"),
    "pry_basin": Text("PRY", "v1 abstract (Polyanskiy, Rigollet, Yao): no global synchronisation for β < −2/3", True,
                      r"no global synchronisation for β < −2/3: starts near the 3-cluster state stay apart"),
    "pry_sync": Text("PRY", "v1 abstract (Polyanskiy, Rigollet, Yao): synchronisation for all β ≥ −0.16",
                     True,
                     r"synchronisation from generic starts for every β ≥ −0.16"),
    "long_context_d3": Text("BRCPL", _BRCPL, True,
                            r"\(\beta^*_n\asymp n^{2/(d-1)}\) for uniform keys on \(S^{d-1}\), d = 3"),
    "long_context_d4": Text("BRCPL", _BRCPL, True,
                            r"the same, d = 4"),
    "post_ln_rate": Text("R", _R_ABSTRACT, False,
                         r"Post-LN: \(1-\rho\sim e^{-2t}\)", shares="the linearisation of " + _EQUIANGULAR),
    "pre_ln_power": Text("R", _R_ABSTRACT, False,
                         r"Pre-LN: \(1-\rho\sim t^{-2}\)"),
    "glpr_usa": Text("GLPR", "phase diagram; v4 contents read (Section 6, the high-dimensional case); the "
                     "figure was not "
                     "found in public material", False,
                     r"USA kernel, T = 1: the β with half the pairs of random tokens clustered at T tends, as d → ∞, "
                     r"to the β of the equiangular curve \(t^*(\beta) = T\) (measured along d, extrapolated)"),
    "glpr_softmax": Text("GLPR", "phase diagram; v4 contents read (Section 6); the figure was not found in public "
                         "material",
                         False,
                         r"softmax, T = 30: the same limit"),
    "kpr_causal": Text("KPR", "Fig. 2 caption (v2; as quoted by a public review): n = 200, d = 2, β = 64, one "
                    "Rényi centre "
                    "disappears between t = 75 and t = 150", True,
                       r"causal attention, β = 64: the caption's run loses one of its metastable Rényi centres "
                       "between t = 75 and t = 150; read as: such a run is plausible (probability ≥ 5 % over seeds)"),
}

#: rows whose verdict at full size may differ from the quick size, with the reason (read by the page and a test)
SIZE_DRIFT: dict = {}

#: control key suffix -> what the control changes (read by the page)
CONTROL_TEXT = {
    "thm19_golden_control": "β = 1.1 β*",
    "thm19_beta_star_control": "the sign change with H − 1 heads",
    "thm22_early_control": r"equal heads \(\Lambda/H\)",
    "thm27_entropy_control": "random tokens (not equiangular)",
    "clpr_gamma_c_control": "tokens of overlap 0.5 against the ρ = 0.3 form",
    "grr_cap_control": "USA heads (collapse rate e^β)",
    "noise_threshold_control": "κ = κ*/2 (stable)",
    "thm22_late_control": "USA heads",
    "thm25_relu_control": "softmax heads",
    "thm25_relu_ode_control": "USA heads",
    "kpr_causal_control": "starts inside one Rényi ball (40 runs)",
    "pry_nonsync_threshold_control": "5 equal clusters",
    "pry_basin_control": "β > −2/3",
    "pry_sync_control": "3-cluster starts at β = −1",
    "long_context_d3_control": "keys on S³ (d = 4)",
    "long_context_d4_control": "keys on S⁴ (d = 5)",
    "post_ln_rate_control": "USA heads",
    "pre_ln_power_control": "the sphere flow, fitted on log t",
    "glpr_usa_control": "d = 8",
    "glpr_softmax_control": "d = 8",
}


def citation(key: str) -> str:
    """'[TAG] arXiv:id, locator' of a row."""
    text = ROW_TEXT[key]
    return f"[{text.tag}] arXiv:{SOURCES[text.tag][1]}, {text.locator}"
