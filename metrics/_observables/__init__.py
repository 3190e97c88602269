"""Observables of token states: clustering, transport, energies, metastability, densities."""
