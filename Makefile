# libswi -- the two commands of the README, and the CI jobs.
#   make demo   install what is needed, build, segment a fresh phantom, print Dice
#   make test   install, build, run every test (ctest: unit, golden, CLI, export)
#   make build  configure and build only (installs nothing)
#   make ci     what CI runs: .ci/run (make test, then the scripts/ci-*.sh jobs)
#   make python .venv with the swi Python package (Debian's numpy/torch via system site packages)
#   make wheel  dist/swi-*.whl: the package with its compiled core, for any venv (pip install --no-deps)
BUILD ?= build
JOBS ?= 2
FUZZ_SECONDS ?= 60
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all deps build demo test test-asan valgrind fuzz coverage ci bench train-demo python wheel clean

all: build

deps:
	scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)

# deps, then build, in that order even under make -j
demo: deps
	$(MAKE) build
	./$(BUILD)/swi demo --output-dir out

test: deps
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-asan: deps
	scripts/ci-sanitize.sh

valgrind: deps
	scripts/ci-valgrind.sh

fuzz: deps
	scripts/ci-fuzz.sh $(FUZZ_SECONDS)

coverage: deps
	scripts/ci-coverage.sh

ci:
	.ci/run

bench: build
	bench/run.sh $(BUILD)

# The Python package, built offline against the static core (in build-python/).
# The package uses the core only: ONNX Runtime is not fetched for it.
python:
	SWI_SKIP_ORT=1 scripts/install-deps.sh
	/usr/bin/python3 -m venv --system-site-packages .venv
	SWI_JOBS=$(JOBS) .venv/bin/python -m pip install -q --no-build-isolation --no-deps --no-index ./python
	.venv/bin/python -c "import swi; print('swi', swi.__version__, 'in .venv')"

wheel:
	SWI_SKIP_ORT=1 scripts/install-deps.sh
	SWI_JOBS=$(JOBS) /usr/bin/python3 -m pip wheel -q --no-build-isolation --no-deps --no-index ./python -w dist
	@ls dist/swi-*.whl

# Re-train the bundled demo network (needs Debian's python3-torch; minutes on 2 cores).
train-demo: build
	apt-get install -y -qq python3-torch python3-numpy python3-onnx >/dev/null
	python3 tools/train_demo.py --phantom $(BUILD)/swi-phantom --out models/demo.onnx

clean:
	rm -rf $(BUILD) out build-python python/build .venv dist
