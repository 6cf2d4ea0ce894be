# Haul: `make run` starts a server on 127.0.0.1:8080, `make test` runs the whole suite.
SWIFT ?= swift
LISTEN ?= 127.0.0.1:8080
DOWNLOAD_DIR ?= ./downloads
DATA_DIR ?= ./data

.PHONY: deps build run test bench bench-quick spec format clean

deps:
	@./scripts/install-deps.sh

build: deps
	$(SWIFT) build -c release

run: build
	.build/release/haul serve --listen $(LISTEN) --download-dir $(DOWNLOAD_DIR) --data-dir $(DATA_DIR)

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-swift-testing
	python3 bench/bench.py --haul .build/debug/haul --quick

# Every scenario of bench/bench.py at full size; the report lands in bench/results/latest.md.
bench: deps
	$(SWIFT) build -c release
	python3 bench/bench.py --haul .build/release/haul

# The benchmark harness on tiny inputs: checks it still works (and every file's sha256), not speed.
bench-quick: deps
	$(SWIFT) build
	python3 bench/bench.py --haul .build/debug/haul --quick

# Regenerates the copy of openapi.yaml compiled into the server (a test fails when they differ).
spec:
	./scripts/embed-openapi.sh

clean:
	rm -rf .build
