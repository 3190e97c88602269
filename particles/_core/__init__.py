"""Core of the particles layer: errors, input validation, geometry, the blocking rule.

Imports nothing of headflow above it; every other subpackage may import it.
"""
