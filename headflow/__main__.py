"""``python -m headflow ...`` is the ``headflow`` console script."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
