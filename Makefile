# libswi -- the two commands of the README, and the CI jobs.
#   make demo   install what is needed, build, segment a fresh phantom, print Dice
#   make test   install, build, run every test (ctest: unit, golden, CLI, export)
#   make ci     what CI runs: make test, then ASan/UBSan, valgrind and the fuzzers
BUILD ?= build
JOBS ?= 2
FUZZ_SECONDS ?= 60
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all deps build demo test test-asan valgrind fuzz ci bench train-demo clean

all: build

deps:
	scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	./$(BUILD)/swi demo --output-dir out

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-asan: deps
	scripts/ci-sanitize.sh

valgrind: build
	scripts/ci-valgrind.sh

fuzz: deps
	scripts/ci-fuzz.sh $(FUZZ_SECONDS)

ci: test test-asan valgrind fuzz

bench: build
	bench/run.sh $(BUILD)

# Re-train the bundled demo network (needs Debian's python3-torch; minutes on 2 cores).
train-demo: build
	apt-get install -y -qq python3-torch python3-numpy python3-onnx >/dev/null
	python3 tools/train_demo.py --phantom $(BUILD)/swi-phantom --out models/demo.onnx

clean:
	rm -rf $(BUILD) out
