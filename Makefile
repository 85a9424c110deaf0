# aesgen — `make demo` sets up and runs the main job on this CPU; `make test` sets up and tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
OUT    := out
# System tools: the assembler/linker, benchmark peers, llvm-mca for modelled targets, and
# crypto++'s test vectors (McGrew-Viega GCM cases; the verifier skips them if absent).
# binutils-mingw-w64-x86-64: the MinGW assembler that proves --abi win64 files assemble as COFF.
APT_PACKAGES := gcc binutils libssl-dev libipsec-mb-dev llvm-19 libcrypto++-utils binutils-mingw-w64-x86-64
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: setup test test-portability test-full demo clean regen-check regen-docs

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  dpkg -s $(APT_PACKAGES) >/dev/null 2>&1 || { \
	    echo "installing system packages: $(APT_PACKAGES)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(APT_PACKAGES) >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(APT_PACKAGES) >/dev/null; }; }; \
	else echo "not root: skipping apt packages ($(APT_PACKAGES))"; fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	touch $@

# The suite on this CPU, then the `portability` tests again under each CPU view of
# aesgen.cpu.PORTABILITY_MASKS (AVX2+VAES without AVX-512; AES-NI+AVX without VAES; no AES-NI).
test: setup
	$(BIN)/pytest -q -n $(JOBS)
	$(MAKE) --no-print-directory test-portability

test-portability: setup
	@for view in $$($(BIN)/python -m aesgen.cpu --portability-masks); do \
	  name=$${view%%=*}; mask=$${view#*=}; \
	  echo "portability pass $$name: AESGEN_CPU_MASK=$$mask"; \
	  AESGEN_CPU_MASK=$$mask $(BIN)/pytest -q -n $(JOBS) -m portability || exit 1; \
	done

test-full: setup
	$(BIN)/pytest -q -n $(JOBS) -m "full or not full"

demo: setup
	$(BIN)/python -m aesgen.tools.demo --out $(OUT)

# Rewrite what the docs derive from the code: docs/abi.md's function table (from aesgen.functions).
regen-docs: setup
	$(BIN)/python -m aesgen.tools.abi_doc docs/abi.md

# Regenerate the golden kernels and the derived docs, and fail if either changed (avo-style).
regen-check: regen-docs
	AESGEN_UPDATE_GOLDEN=1 $(BIN)/pytest -q tests/test_pipeline.py -k golden
	git diff --exit-code -- tests/golden docs/abi.md

clean:
	rm -rf $(OUT) build .pytest_cache *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
