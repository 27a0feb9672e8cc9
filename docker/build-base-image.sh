#!/usr/bin/env bash
# Build a Debian bookworm base image with Python 3.11 from Debian packages alone (mmdebstrap),
# for machines that cannot pull python:3.11-slim-bookworm from Docker Hub, and import it into
# the local image store. The Dockerfile then builds on it with
#
#   docker/build-base-image.sh                       # -> localhost/debian-python:bookworm
#   podman build --network=host --build-arg BASE_IMAGE=localhost/debian-python:bookworm ...
#
# The image behaves like python:3.11-slim-bookworm where the Dockerfile relies on it:
# `python`, `pip` and the scripts pip installs are on PATH (a venv in /opt/python, since
# Debian's own Python refuses `pip install` into the system, PEP 668), apt-get works against
# the same Debian mirror, CMD is python.
#
# Environment (all optional):
#   IMAGE           tag to import as            (default localhost/debian-python:bookworm)
#   SUITE           Debian suite                (default bookworm)
#   MIRROR          Debian mirror               (default: the first URIs of this machine's
#                   /etc/apt/sources.list.d/debian.sources, else http://deb.debian.org/debian)
#   SECURITY_MIRROR Debian security mirror      (default: MIRROR with /debian -> /debian-security)
#   ENGINE          podman | buildah | docker   (default: the first one found)
#   KEEP_TAR        path to keep the rootfs tarball at (default: a temporary file, removed)
# Needs root (or mmdebstrap's unshare mode with subuids) and mmdebstrap >= 1.0.
set -euo pipefail

IMAGE=${IMAGE:-localhost/debian-python:bookworm}
SUITE=${SUITE:-bookworm}

host_mirror() {
    local f=/etc/apt/sources.list.d/debian.sources
    [[ -r $f ]] || return 0
    awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' "$f"
}
MIRROR=${MIRROR:-$(host_mirror)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
MIRROR=${MIRROR%/}
SECURITY_MIRROR=${SECURITY_MIRROR:-${MIRROR%/debian}/debian-security}

if [[ -z ${ENGINE:-} ]]; then
    for candidate in podman buildah docker; do
        if command -v "$candidate" >/dev/null; then ENGINE=$candidate; break; fi
    done
fi
[[ -n ${ENGINE:-} ]] || { echo "need podman, buildah or docker to import the image" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { echo "need mmdebstrap (apt-get install mmdebstrap)" >&2; exit 1; }

tar=${KEEP_TAR:-$(mktemp --suffix=.tar)}
[[ -n ${KEEP_TAR:-} ]] || trap 'rm -f "$tar"' EXIT

echo "mmdebstrap $SUITE from $MIRROR (security: $SECURITY_MIRROR) -> $tar" >&2
# minbase + Python: python3 (3.11 in bookworm), venv (with Debian's pip wheel), certificates
# for pip and HTTPS, python-is-python3 for `python`. No Recommends (mmdebstrap's default).
# The venv /opt/python is what `python` and `pip` mean in the image. mmdebstrap's own
# cleanup empties the apt lists, the apt cache and /tmp at the end. No hook may clear the
# rootfs' /tmp: mmdebstrap keeps its apt.conf there, and without it that cleanup runs the
# host's apt instead (seen here: it emptied the host's /var/lib/apt/lists).
mmdebstrap \
    --variant=minbase \
    --include=ca-certificates,python3,python3-venv,python-is-python3 \
    --customize-hook='chroot "$1" python3 -m venv /opt/python' \
    --customize-hook='chroot "$1" /opt/python/bin/python -m pip --version' \
    "$SUITE" "$tar" \
    "deb $MIRROR $SUITE main" \
    "deb $MIRROR $SUITE-updates main" \
    "deb $SECURITY_MIRROR $SUITE-security main"

changes=(
    --change 'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    --change 'ENV VIRTUAL_ENV=/opt/python'
    --change 'ENV LANG=C.UTF-8'
    --change 'CMD ["python"]'
)
case $ENGINE in
    podman|docker) "$ENGINE" import "${changes[@]}" "$tar" "$IMAGE" ;;
    buildah)
        # buildah has no import: start from scratch, unpack, set the config.
        ctr=$(buildah from scratch)
        mnt=$(buildah mount "$ctr")
        tar -xpf "$tar" -C "$mnt" --numeric-owner
        buildah umount "$ctr"
        buildah config --env PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            --env VIRTUAL_ENV=/opt/python --env LANG=C.UTF-8 --cmd python "$ctr"
        buildah commit --rm "$ctr" "$IMAGE"
        ;;
    *) echo "unknown ENGINE $ENGINE" >&2; exit 1 ;;
esac
echo "imported $IMAGE" >&2
