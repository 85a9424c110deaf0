# aesgen — `make demo` sets up and runs the main job on this CPU; `make test` sets up and tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
OUT    := out
# System tools: the assembler/linker, benchmark peers, llvm-mca for modelled targets, and
# crypto++'s test vectors (McGrew-Viega GCM cases; the verifier skips them if absent).
# binutils-mingw-w64-x86-64: the MinGW assembler that proves --abi win64 files assemble as COFF.
# iverilog, verilator, yosys, nextpnr-ice40: `aesgen hdl`'s simulation, lint, area report and fmax.
APT_PACKAGES := gcc binutils libssl-dev libipsec-mb-dev llvm-19 libcrypto++-utils binutils-mingw-w64-x86-64 \
                iverilog verilator yosys nextpnr-ice40
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
# The optional peers' build tools (`make peers` only): cmake, ninja, and C++ for BoringSSL.
PEER_APT_PACKAGES := cmake ninja-build g++

.PHONY: setup test test-portability test-full demo clean regen-check regen-docs peers

# $(call apt_install,PACKAGES): as root on a system with apt-get, install what is missing; else say so.
define apt_install
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  dpkg -s $(1) >/dev/null 2>&1 || { \
	    echo "installing system packages: $(1)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(1) >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(1) >/dev/null; }; }; \
	else echo "not root: skipping apt packages ($(1))"; fi
endef

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(call apt_install,$(APT_PACKAGES))
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

# Optional: BoringSSL's and AWS-LC's libcrypto as shared libraries, for `aesgen bench --compare boringssl,awslc`
# (without them those peers read n/a). The sources are the crates that vendor them (boring-sys, aws-lc-sys),
# fetched with cargo 1.82+ at the versions and sha256 pinned in generator/bench/peer_libs.py, built with
# cmake + ninja (libcrypto only, Release) into build/peers/NAME-VERSION/. A second run is a no-op.
peers: setup
	$(call apt_install,$(PEER_APT_PACKAGES))
	JOBS=$(JOBS) $(BIN)/python -m aesgen.bench.peer_libs

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
