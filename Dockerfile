# edgebuild with the same install as a developer machine and CI (scripts/setup.sh).
#   docker build -t edgebuild .
#   docker run --rm -v "$PWD:/work" -w /work edgebuild run recipes/quickstart.yaml
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends make dataset-fashion-mnist \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/edgebuild
COPY . .
# The CPU build of torch; a plain `torch` would pull the CUDA build (several GB).
ENV PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu \
    VENV=/opt/venv \
    EDGEBUILD_CACHE_DIR=/cache \
    CI=true
RUN bash scripts/setup.sh && touch /opt/venv/.edgebuild-installed
ENV PATH=/opt/venv/bin:$PATH
ENTRYPOINT ["edgebuild"]
CMD ["--help"]
