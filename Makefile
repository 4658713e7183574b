# Each target sets itself up: a fresh clone needs only python3 (>= 3.10) and make.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: check test test-exhaustive lint bench dist report-screenshot clean

# The main job: replay every bundled cassette through its adapter, check goldens
# and the ordering rules, print a table.
check: $(VENV)/.installed
	$(BIN)/dsh-replay check cassettes

# The test suite (pytest exits 5 when it collects nothing: that fails the target).
# The few slow, exhaustive matrices (marker `exhaustive`) are left to test-exhaustive, which CI runs too.
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n 2 -p xdist --dist loadfile -m "not exhaustive"

test-exhaustive: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n 2 -p xdist --dist loadfile -m exhaustive

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check dsh_replay tests benchmarks examples
	$(BIN)/mypy --strict dsh_replay

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/run.py

# The sdist and wheel a user installs outside this repository: pip install dist/dsh_replay-*.whl
dist: $(VENV)/.installed-dev
	$(BIN)/python -m build --no-isolation --outdir dist .

# The report rendered in headless Chromium and checked not blank; fails (not skips) without Chromium.
report-screenshot: $(VENV)/.installed-dev
	DSH_REPLAY_REQUIRE_CHROMIUM=1 $(BIN)/python -m pytest tests/cli/test_report_screenshot.py -q -p no:randomly

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.created
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.created
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist
