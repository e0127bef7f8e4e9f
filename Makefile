# The course in two commands: `make course` runs every notebook on the bundled data, `make test` runs all tests.
# Both create the environment (.venv, pip) first when it is missing or pyproject.toml changed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch first, pinned: these wheels lie on the course machines' disk (override for another build, e.g. a CPU one)
TORCH ?= torch==2.14.1 torchvision==0.29.1
KERNEL ?= vit-course
STAMP := $(VENV)/.installed

.PHONY: setup course site test test-lib test-variants test-presets lint format lab clean-venv full-fashion-mnist assignments grade check-assignments
.DEFAULT_GOAL := help

help:
	@echo "make course   set up if needed, then run every notebook with papermill (executed copies under runs/)"
	@echo "make site     set up if needed, then build the course's website from the committed notebooks (_build/site)"
	@echo "make test     set up if needed, then the linter (ruff), every test (vitlib, course, classroom) and nbval on every notebook"
	@echo "make test-lib vitlib's own tests alone, in about 2 minutes (the multi-process torchrun tests left out)"
	@echo "make test-variants    every notebook at every one of its non-default parameter sets"
	@echo "make test-presets     every notebook at its first non-default parameter set, the experiment notebooks at their full preset"
	@echo "                      with shrunk budgets, on the bundled data (CI runs it after make test)"
	@echo "make format   format the code with ruff (make lint checks it without changing anything)"
	@echo "make lab      start JupyterLab on the course with the '$(KERNEL)' kernel"
	@echo "make setup    create $(VENV) and register the kernel"
	@echo "make assignments    the student versions of the notebooks and the library assignment, in assignments/release"
	@echo "make grade SUBMISSIONS=dir REPORTS=dir [GRADE_ARGS='--workers 2 --hidden dir']    grade a class (one folder per student; needs bubblewrap)"
	@echo "make check-assignments    grade every assignment for a synthetic class and check the scores"

$(STAMP): pyproject.toml setup.py classroom/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (ViT course)" >/dev/null
	touch $(STAMP)

setup: $(STAMP)

course: setup
	$(PY) scripts/run_course.py

# the website of the executed course: the committed notebooks with their outputs, nothing re-run; opens offline
site: setup
	$(PY) scripts/build_site.py --out _build/site

# one pytest-xdist worker per core, one thread each (the course's models are too small for two threads to pay);
# --dist loadscope keeps every notebook's cells, in order, on one worker; the notebooks (the longest scopes) go first
# so that the many short tests fill the end of the run instead of one worker waiting for the other's last notebook
test: setup lint
	OMP_NUM_THREADS=1 $(PY) -m pytest notebooks tests course/tests classroom/tests --nbval-lax --nbval-current-env -q \
		-n auto --dist loadscope --durations=40

# vitlib's tests alone (tests/): a change to the model or the engine checked in minutes; make test runs them too, with
# the torchrun ones (DDP, FSDP: several processes, about 3 minutes more on 2 cores)
test-lib: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest tests -m "not torchrun" -q -n auto --dist loadscope --durations=10

# every non-default parameter set each notebook lists in metadata.vitlib.variants (about 30-40 minutes on 2 cores)
test-variants: setup
	VITLIB_VARIANTS=all OMP_NUM_THREADS=1 $(PY) -m pytest course/tests/test_notebook_variants.py -q -n auto --dist loadscope

# every notebook at its first non-default parameter set, and the experiment notebooks at their `full` preset with its
# budgets shrunk, on the bundled data; make test (whose nbval runs every notebook at its defaults) leaves both out to
# save time (CI runs it after make test, time allowing)
test-presets: setup
	VITLIB_VARIANTS=first VITLIB_FULL_PRESETS=1 OMP_NUM_THREADS=1 $(PY) -m pytest course/tests/test_notebook_variants.py \
		course/tests/test_full_presets.py -q -n auto --dist loadscope --durations=20

# ruff: format and lint rules in pyproject.toml (120 columns); CI fails on a lint error or unformatted code
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks

# The full Fashion-MNIST from Debian (needs root), for scripts/make_fashion_mnist_mini.py and the bigger presets.
full-fashion-mnist:
	apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist

clean-venv:
	rm -rf $(VENV)

# Classroom (README, "For instructors"): the student versions, grading a class, and grading every assignment for a
# synthetic class (instructor = full marks, released = zero, partial = exactly its answers)
SUBMISSIONS ?= submissions
REPORTS ?= reports

assignments: setup
	$(PY) -m classroom release --out assignments/release

grade: setup
	$(PY) -m classroom grade "$(SUBMISSIONS)" --out "$(REPORTS)" $(GRADE_ARGS)

check-assignments: setup
	OMP_NUM_THREADS=1 $(PY) -m classroom check --out assignments/check
