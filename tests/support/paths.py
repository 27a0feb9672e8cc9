"""Where the test data and the repository are."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
DATA = TESTS / "data"
TREES = DATA / "trees"
REPO = TESTS.parent
