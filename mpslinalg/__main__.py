"""``python -m mpslinalg``: the library's own report; the job lives in :mod:`mpslinalg.mainjob`."""

from mpslinalg.mainjob import main

if __name__ == "__main__":
    raise SystemExit(main())
