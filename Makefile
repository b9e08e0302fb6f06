# libswi -- the two commands of the README, and the CI jobs.
#   make demo   install what is needed, build, segment a fresh phantom, print Dice
#   make test   install, build, run every test (ctest: unit, golden, CLI, export)
#   make build  configure and build only (installs nothing)
#   make ci     what CI runs: .ci/run (make test, then the scripts/ci-*.sh jobs)
#   make wheel  dist/swi-*.whl: the whole Python product (pipeline, readers, ONNX Runtime, NiiVue) for any venv
#   make python .venv with that wheel installed (Debian's numpy/torch via system site packages)
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

# The Python package: one wheel (dist/swi-*.whl) with the whole product -- the core, the
# pipeline (swi.segment, segment_folder, plan_job), readers and writers, swi.report with
# NiiVue, ONNX Runtime carried in swi.libs/ -- built offline against build-python/;
# `make python` installs that wheel into .venv (Debian's numpy/torch via system site packages).
python: wheel
	/usr/bin/python3 -m venv --system-site-packages .venv
	.venv/bin/python -m pip install -q --no-deps --no-index --force-reinstall $$(ls -t dist/swi-*.whl | head -n 1)
	cd / && $(CURDIR)/.venv/bin/python -c "import swi; print('swi', swi.__version__, 'in .venv')"

wheel: deps
	rm -rf dist python/build
	SWI_JOBS=$(JOBS) /usr/bin/python3 -m pip wheel -q --no-build-isolation --no-deps --no-index ./python -w dist
	@ls dist/swi-*.whl

# Re-train the bundled demo network (needs Debian's python3-torch; minutes on 2 cores).
train-demo: build
	apt-get install -y -qq python3-torch python3-numpy python3-onnx >/dev/null
	python3 tools/train_demo.py --phantom $(BUILD)/swi-phantom --out models/demo.onnx

clean:
	rm -rf $(BUILD) out build-python python/build .venv dist
