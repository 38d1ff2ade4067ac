# The executor image: runs `studio execute <execution_id>` in a Kubernetes Job
# (docs/sphinx/executors.rst). Secrets never enter the image: the Job reads them from a Secret.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# git for the workspace and the git domain; bubblewrap for the command sandbox (Landlock needs
# no package: it is a kernel feature); Node and npm for the legacy runtime's agent CLIs.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git bubblewrap ca-certificates nodejs npm \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --gid 10001 studio \
    && useradd --uid 10001 --gid 10001 --home-dir /home/studio --create-home \
       --shell /usr/sbin/nologin studio \
    && mkdir -p /workspace \
    && chown 10001:10001 /workspace

WORKDIR /opt/studio
# The legacy runtime's agent CLIs (codex, gemini), pinned by the lockfile (legacy_runtime docs).
COPY agent-clis/package.json agent-clis/package-lock.json ./agent-clis/
RUN cd agent-clis && npm ci --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
RUN pip install . && rm -rf /opt/studio/app

ENV HOME=/home/studio \
    STUDIO_WORKSPACE_DIR=/workspace \
    STUDIO_MIGRATIONS_DIR=/opt/studio/migrations \
    STUDIO_LEGACY_CLI_DIR=/opt/studio/agent-clis/node_modules/.bin \
    STUDIO_SANDBOX=required

USER 10001:10001
WORKDIR /workspace
ENTRYPOINT ["studio"]
CMD ["--help"]
