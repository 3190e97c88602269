"""The dataset schema: conventions, provenance, time coordinates, trajectories and head geometry."""
