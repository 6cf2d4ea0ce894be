# Haul: `make run` starts a server on 127.0.0.1:8080, `make test` runs the whole suite.
SWIFT ?= swift
LISTEN ?= 127.0.0.1:8080
DOWNLOAD_DIR ?= ./downloads
DATA_DIR ?= ./data

.PHONY: deps deps-run deps-docker build run test check sanitize bench bench-quick bench-instructions fuzz \
	schemathesis docker \
	docker-check docker-test screenshots format clean

# Debian packages by need: building and running (make run), the suite and benchmarks, the container test.
deps-run:
	@./scripts/install-deps.sh run
deps:
	@./scripts/install-deps.sh test
deps-docker:
	@./scripts/install-deps.sh docker

# Release builds link the Swift runtime and FoundationEssentials statically, as the container does: less resident
# memory than mapping the shared libraries (make bench, scenario E), and nothing from the toolchain at run time.
RELEASE = -c release --static-swift-stdlib

build: deps-run
	$(SWIFT) build $(RELEASE)

run: build
	.build/release/haul serve --listen $(LISTEN) --download-dir $(DOWNLOAD_DIR) --data-dir $(DATA_DIR)

# The venv first: the end-to-end tests start its FTP server.
test: deps
	./scripts/venv.sh >/dev/null
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-swift-testing
	$$(./scripts/venv.sh)/bin/openapi-spec-validator openapi.yaml
	$$(./scripts/venv.sh)/bin/python Tests/Dashboard/dashboard_test.py .build/debug .build/screenshots
	$$(./scripts/venv.sh)/bin/python Tests/Dashboard/cors_test.py .build/debug
	$$(./scripts/venv.sh)/bin/python Tests/Dashboard/extension_test.py .build/debug
	$$(./scripts/venv.sh)/bin/python Tests/Dashboard/play_test.py .build/debug
	$$(./scripts/venv.sh)/bin/python Tests/QBittorrent/qbittorrent_test.py .build/debug
	./docker/check.sh
	python3 docker/nginx_log_test.py .build/debug
	.build/debug/HaulFuzz Tests/Fuzz/corpus
	./scripts/schemathesis.sh .build/debug/haul 100
	$(MAKE) fuzz
	python3 bench/bench.py --haul .build/debug/haul --quick
	python3 bench/test_harness.py --haul .build/debug/haul

# Formats every Swift file by .swift-format's rules (swift-format, which comes with the toolchain).
format:
	$(SWIFT) format --in-place --recursive --parallel Package.swift Sources Tests

# The suite again under AddressSanitizer (with LeakSanitizer) and ThreadSanitizer, each in its own build directory;
# any report fails the run. The end-to-end tests then start sanitized `haul` and TestOrigin binaries too.
SANITIZER_ENV = HAUL_SANITIZER=1 LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/sanitizers/lsan.supp \
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/Tests/sanitizers/tsan.supp"
sanitize: deps
	./scripts/venv.sh >/dev/null
	$(SWIFT) build --build-tests --sanitize=address --build-path .build/asan
	$(SANITIZER_ENV) $(SWIFT) test --skip-build --sanitize=address --build-path .build/asan --disable-swift-testing
	$(SWIFT) build --build-tests --sanitize=thread --build-path .build/tsan
	$(SANITIZER_ENV) $(SWIFT) test --skip-build --sanitize=thread --build-path .build/tsan --disable-swift-testing

# What CI runs: the suite, the suite under the sanitizers, and the container image built and run.
check: test sanitize docker-test

# Every scenario of bench/bench.py at full size; the report lands in bench/results/latest.md.
bench: deps
	$(SWIFT) build $(RELEASE)
	python3 bench/bench.py --haul .build/release/haul

# Instructions (callgrind) the server spends on fixed workloads: the same for the same binary on a busy machine,
# so two builds compare without wall time's noise. `make bench-instructions BASE=REV` builds REV beside it too.
bench-instructions: deps
	$(SWIFT) build $(RELEASE)
	@if [ -n "$(BASE)" ]; then \
		rm -rf .build/base && git worktree add --force --detach .build/base $(BASE) >/dev/null && \
		(cd .build/base && $(SWIFT) build $(RELEASE)) && \
		bench/instructions.sh .build/base/.build/release/haul .build/release/haul; \
		git worktree remove --force .build/base; \
	else bench/instructions.sh .build/release/haul; fi

# The benchmark harness on tiny inputs: checks it still works (and every file's sha256), not speed.
bench-quick: deps
	$(SWIFT) build
	python3 bench/bench.py --haul .build/debug/haul --quick

# libFuzzer on the parsers of what origins and clients send (Tests/Fuzz), in its own build directory. `make test`
# runs FUZZ_RUNS inputs from a fixed seed, so CI is repeatable; `make fuzz FUZZ_SECONDS=600` explores with a random
# seed for that long and keeps what it finds in .build/fuzz-corpus. A crash leaves its input in .build/.
FUZZ_RUNS ?= 300000
FUZZ_SECONDS ?=
FUZZ_FLAGS = $(if $(FUZZ_SECONDS),-max_total_time=$(FUZZ_SECONDS),-runs=$(FUZZ_RUNS) -seed=1)
fuzz: deps
	$(SWIFT) build --build-path .build/fuzz --product HaulFuzz --sanitize=fuzzer -Xswiftc -DFUZZING
	mkdir -p .build/fuzz-corpus
	SWIFT_BACKTRACE=enable=no .build/fuzz/debug/HaulFuzz $(FUZZ_FLAGS) -timeout=5 -rss_limit_mb=1024 \
		-artifact_prefix=.build/ .build/fuzz-corpus Tests/Fuzz/corpus

# The live API against openapi.yaml (schemathesis from PyPI): no 5xx, every answer as the spec says.
schemathesis: deps
	$(SWIFT) build
	./scripts/schemathesis.sh .build/debug/haul 100

# The container image, with a Docker engine. `make test` checks the Dockerfile without one (docker/check.sh).
docker:
	docker build -f docker/Dockerfile -t haul:latest --build-arg HAUL_REVISION=$$(git rev-parse HEAD) .

docker-check: deps
	./docker/check.sh

# The image built from docker/Dockerfile and run as README says, without a Docker engine: buildah builds it from
# base images made here (mmdebstrap, this machine's Swift toolchain), and each container runs in a network namespace
# of its own (docker/test_image.py). Needs root, as CI has.
docker-test: deps-docker
	python3 docker/test_image.py

# The dashboard test, then the screenshots README links copied over the committed ones in dashboard/screenshots
# (the test takes about thirty; these are the ones kept in the tree).
SCREENSHOTS = list-1400 detail-1400 list-1024 menu-1024 list-420 detail-420 offline-1400 confirm-1400 \
	settings-1400 webhooks category-1400 compact-10000 tokens-1400 add-420
screenshots: deps
	$(SWIFT) build
	$$(./scripts/venv.sh)/bin/python Tests/Dashboard/dashboard_test.py .build/debug .build/screenshots
	rm -f dashboard/screenshots/*.png
	for name in $(SCREENSHOTS); do cp .build/screenshots/$$name.png dashboard/screenshots/; done


clean:
	rm -rf .build
