"""Statistics over runs: rate fits, breakdown laws and horizons."""
