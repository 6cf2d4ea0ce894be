#!/usr/bin/env bash
# Checks docker/Dockerfile where no Docker engine runs (make docker-test builds and runs it): hadolint passes, and
# every shared library the binary needs when built as the Dockerfile builds it (ldd) belongs to a Debian package
# that the runtime stage installs, that one of those depends on, or that the slim base image holds (priority
# "required"). A library missing from the runtime stage fails the check before any image is built.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(./scripts/venv.sh)

"$venv/bin/hadolint" --config docker/hadolint.yaml docker/Dockerfile docker/swift-builder.Containerfile
echo "docker-check: hadolint passes on docker/Dockerfile and docker/swift-builder.Containerfile"

# The build stage's `swift build` flags, run here in a build directory of their own.
flags=$(sed -n 's/^RUN swift build \(.*\) \\$/\1/p' docker/Dockerfile)
[ -n "$flags" ] || { echo "docker-check: no 'RUN swift build ... \\' line in docker/Dockerfile" >&2; exit 1; }
# shellcheck disable=SC2086
swift build $flags --build-path .build/docker
# shellcheck disable=SC2086
binary="$(swift build $flags --build-path .build/docker --show-bin-path)/haul"

# The packages the runtime stage (after the last FROM) installs.
runtime=$(awk '/^FROM /{stage=""} {stage=stage $0 "\n"} END{printf "%s", stage}' docker/Dockerfile \
    | tr '\\\n' '  ' | grep -o 'apt-get install -y --no-install-recommends [^&]*' \
    | sed 's/apt-get install -y --no-install-recommends//')
[ -n "${runtime// }" ] || { echo "docker-check: the runtime stage installs no packages" >&2; exit 1; }
# shellcheck disable=SC2086
provided=$( { printf '%s\n' $runtime
              apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
                  --no-enhances $runtime | grep -v '^ ' | tr -d '<>'
              dpkg-query -W -f='${Package} ${Priority}\n' | awk '$2 == "required" {print $1}'
            } | sed 's/:.*//' | sort -u)

# The package that installed a library file, trying the /lib and /usr/lib spellings (usrmerge).
owner() {
    local path=$1 real candidate
    real=$(readlink -f "$path")
    for candidate in "$path" "$real" "/usr$path" "${path#/usr}" "/usr$real" "${real#/usr}"; do
        dpkg-query -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1 && return 0
    done
    return 1
}

status=0
while read -r line; do
    case $line in
        *"not found"*) echo "docker-check: $line" >&2; status=1; continue ;;
        linux-vdso*) continue ;;
    esac
    path=$(echo "$line" | sed -n 's/.*=> \([^ ]*\) .*/\1/p')
    [ -n "$path" ] || path=$(echo "$line" | awk '{print $1}')
    if ! package=$(owner "$path"); then
        echo "docker-check: $path is not from a Debian package" >&2
        status=1
    elif ! grep -qx "$package" <<< "$provided"; then
        echo "docker-check: $path comes from $package, which the runtime stage does not install" >&2
        status=1
    else
        printf '  %-48s %s\n' "$path" "$package"
    fi
done < <(ldd "$binary")
[ $status -eq 0 ] && echo "docker-check: every library $binary needs is in the runtime image"
exit $status
