# Haul: `make run` starts a server on 127.0.0.1:8080, `make test` runs the whole suite.
SWIFT ?= swift
LISTEN ?= 127.0.0.1:8080
DOWNLOAD_DIR ?= ./downloads
DATA_DIR ?= ./data

.PHONY: deps build run test bench spec format clean

deps:
	@./scripts/install-deps.sh

build: deps
	$(SWIFT) build -c release

run: build
	.build/release/haul serve --listen $(LISTEN) --download-dir $(DOWNLOAD_DIR) --data-dir $(DATA_DIR)

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-swift-testing

bench:
	@./scripts/install-deps.sh --bench
	$(SWIFT) build -c release
	./bench/run.sh

# Regenerates the copy of openapi.yaml compiled into the server (a test fails when they differ).
spec:
	./scripts/embed-openapi.sh

clean:
	rm -rf .build
