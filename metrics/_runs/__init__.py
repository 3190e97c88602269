"""The run engine: sweeps, the verified cell store, executors, progress and shared parameters."""
