# LayerScope dashboard: docker build -t layerscope . && docker run --rm -p 8000:8000 layerscope
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 layerscope
WORKDIR /app
COPY pyproject.toml README.md ./
COPY backend ./backend
COPY frontend ./frontend
COPY scenarios ./scenarios
RUN pip install . && rm -rf /app/backend /app/frontend /app/scenarios

USER layerscope
WORKDIR /home/layerscope
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request, sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
# Inside a container the dashboard must listen on all interfaces; publish the port to choose who reaches it.
CMD ["layerscope", "serve", "--host", "0.0.0.0", "--port", "8000"]
