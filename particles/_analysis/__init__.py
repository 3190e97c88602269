"""Analysis of a model along a state or a trajectory: diagnostics, value misalignment, head
orthogonality, radial dominance, critical points."""
