"""Studies: declared specs run on the engine (limit, chaos, phase diagram) and their references."""
