# Every target is one line over the project's own scripts (tools/).
VENV ?= .venv
PY := $(VENV)/bin/python
CHAPTERS := $(wildcard chapters/[0-9][0-9]_*.py)

.PHONY: setup book unit test check-html export sync notebooks diagrams student grade grade-selftest lab bench gpu-check device-bundle

setup:            ## create .venv and install everything (quick when already done)
	bash tools/authoring/setup.sh

VENDOR = npm install --silent --no-audit --no-fund --prefix _build/vendor
book: setup       ## the HTML book from the committed notebooks (EXECUTE=1: run every chapter first)
	$(VENDOR) mathjax@3.2.2
	$(PY) tools/authoring/build_book.py $(if $(EXECUTE),--execute)

unit: setup       ## the fast tests in parallel (no subprocess, kernel, grading or training run)
	BERT_BOOK_SIZE=smoke $(PY) -m pytest tests -m "not slow" -n 2 -q -p no:cacheprovider

test: setup       ## unit tests, sync checks, and every chapter under nbval at smoke size
	BERT_BOOK_SIZE=smoke $(PY) -m pytest tests chapters --nbval-lax --nbval-current-env -p no:cacheprovider

check-html: setup ## build the book from the committed notebooks, check it in headless Chromium
	$(VENDOR) mathjax@3.2.2 requirejs@2.3.6 d3@5.7.0 jquery@2.2.4
	$(PY) tools/authoring/build_book.py
	$(PY) tools/authoring/check_html.py

export: setup     ## write bertlib/ from the chapters' export cells
	$(PY) tools/authoring/export.py

sync: export      ## slug-derived cells and README table, then pair each .py with its .ipynb
	$(PY) tools/authoring/environment.py
	$(PY) tools/authoring/sync.py

notebooks: sync   ## re-execute every chapter at cpu size into its committed .ipynb
	BERT_BOOK_SIZE=cpu $(VENV)/bin/jupytext --sync --execute --set-kernel python3 $(CHAPTERS)

diagrams: setup   ## redraw the chapters' diagrams (chapters/figures/*.svg) from tools/authoring/diagrams.py
	$(PY) tools/authoring/diagrams.py

student: setup    ## student copies in _build/student (nbgrader generate_assignment)
	$(PY) tools/grading/student.py _build/student

SUBMISSIONS ?= submissions
TIMEOUT ?= 60
NOTEBOOK_TIMEOUT ?= 1800
grade: setup      ## nbgrader autograde of SUBMISSIONS/<student>/<chapter>.ipynb, sandboxed, into _build/grades.csv
	$(PY) tools/grading/grade.py $(SUBMISSIONS) --cell-timeout $(TIMEOUT) \
		--notebook-timeout $(NOTEBOOK_TIMEOUT) --out _build/grades.csv

grade-selftest: setup  ## grade every chapter's reference answers with nbgrader (all points expected)
	$(PY) tools/grading/grade_selftest.py

bench: setup      ## bertlib's pretraining step vs transformers': table and plot in benchmarks/results
	$(PY) benchmarks/pretraining_step.py

gpu-check: setup  ## on a CUDA machine: the step's levers, resume, DDP, every chapter as a script, a pretraining budget
	$(PY) tools/gpu_check.py

device-bundle: setup  ## _build/device-data: the data a lent GPU machine without a registry needs
	$(PY) tools/device_bundle.py

lab: setup        ## JupyterLab on the chapters
	$(VENV)/bin/jupyter lab chapters/
