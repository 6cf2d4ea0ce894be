#!/usr/bin/env bash
# Makes the two base images docker/Dockerfile names, where no registry is reachable, in the local container
# storage (podman and buildah share it):
#   localhost/haul-base/debian:bookworm-slim  Debian 12 from its packages (mmdebstrap), slimmed as the official
#                                             slim image is: no manuals, docs but copyrights, locales or info
#                                             pages, and apt keeps no caches (base/docker-clean)
#   localhost/haul-base/swift:bookworm        that, plus the Swift toolchain of this machine (swift-builder.Containerfile)
# An image is made again only when its recipe (this script, the Containerfile, the toolchain's version) changed.
set -euo pipefail
cd "$(dirname "$0")/.."

slim=localhost/haul-base/debian:bookworm-slim
builder=localhost/haul-base/swift:bookworm
work=.build/docker-base
mkdir -p "$work"

# The recipe of an image: what went into it, hashed; kept in its label haul.base.recipe.
recipe() { cat "$0" "$@" | sha256sum | cut -c1-16; }
current() { podman image inspect --format '{{index .Labels "haul.base.recipe"}}' "$1" 2>/dev/null || true; }

slim_recipe=$(recipe docker/base/docker-clean)
if [ "$(current "$slim")" != "$slim_recipe" ]; then
    echo "base-images: making $slim with mmdebstrap" >&2
    # Merged /usr through the hook, as Debian's own images are, rather than the usrmerge package and its perl. With
    # docker-clean in place mmdebstrap's own clean-up leaves apt's caches (72 MB), so the last hook takes them.
    mmdebstrap --quiet --variant=apt --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --customize-hook='copy-in docker/base/docker-clean /etc/apt/apt.conf.d' \
        --customize-hook='rm -f "$1"/var/cache/apt/*.bin' bookworm "$work/slim.tar"
    podman import --quiet --change 'CMD ["bash"]' --change "LABEL haul.base.recipe=$slim_recipe" \
        "$work/slim.tar" "$slim" >/dev/null
    rm -f "$work/slim.tar"
fi

# The toolchain on PATH: .../usr/bin/swift, so its root is two levels up.
swift_bin=$(readlink -f "$(command -v swift)")
toolchain=$(dirname "$(dirname "$(dirname "$swift_bin")")")
[ -d "$toolchain/usr/lib/swift_static" ] || { echo "base-images: no Swift toolchain at $toolchain" >&2; exit 1; }
builder_recipe=$( { recipe docker/swift-builder.Containerfile; "$swift_bin" --version 2>&1; echo "$slim_recipe"; } \
    | sha256sum | cut -c1-16)
if [ "$(current "$builder")" != "$builder_recipe" ]; then
    echo "base-images: making $builder from $slim and the toolchain in $toolchain" >&2
    buildah bud --quiet --isolation chroot --format docker --layers=false --build-arg "BASE_IMAGE=$slim" \
        --label "haul.base.recipe=$builder_recipe" -f docker/swift-builder.Containerfile -t "$builder" \
        "$toolchain" >/dev/null
fi
echo "base-images: $slim and $builder are ready" >&2
