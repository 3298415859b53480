#!/usr/bin/env bash
# make demo: the dashboard, one Celery worker and Celery beat on the embedded
# default (SQLite checkpoints, SQLite dashboard DB, filesystem Celery broker),
# loaded with the real DeerFlow threads. No service needed. Ctrl-C (or SIGTERM to
# this script) stops all three cleanly: each deregisters from the fleet registry,
# so a second `make demo` shows no ghost of the first. Beat runs the schedules the
# README promises (the thread summary refresh, the stalled-job requeue, saved
# retention policies). The worker is a maintenance process: it freezes delta mode
# whatever config.yaml says, so with `checkpoint_channel_mode: full` the 409 page's
# "Convert to full…" still runs to the end.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export DASHBOARD_VAR_DIR="${DASHBOARD_VAR_DIR:-$PWD/var/demo}"
export DEER_FLOW_CONFIG_PATH="${DEER_FLOW_CONFIG_PATH:-$DASHBOARD_VAR_DIR/config.yaml}"
export DJANGO_DEBUG="${DJANGO_DEBUG:-0}"
export DJANGO_ALLOWED_HOSTS="${DJANGO_ALLOWED_HOSTS:-127.0.0.1,localhost}"
PORT="${PORT:-8000}"
if ! $PY -c "import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', int(sys.argv[1])))" "$PORT" 2>/dev/null; then
  echo "Port $PORT on 127.0.0.1 is in use (is the demo already running?). Stop it, or run: PORT=$((PORT + 1)) make demo" >&2
  exit 1
fi
mkdir -p "$DASHBOARD_VAR_DIR/static" "$DASHBOARD_VAR_DIR/celery/broker" "$DASHBOARD_VAR_DIR/celery/results" "$DASHBOARD_VAR_DIR/celery/processed" "$DASHBOARD_VAR_DIR/celery/control"
if [ -z "${DJANGO_SECRET_KEY:-}" ]; then
  [ -f "$DASHBOARD_VAR_DIR/secret-key" ] || $PY -c "import secrets; print(secrets.token_urlsafe(50))" > "$DASHBOARD_VAR_DIR/secret-key"
  DJANGO_SECRET_KEY="$(cat "$DASHBOARD_VAR_DIR/secret-key")"
  export DJANGO_SECRET_KEY
fi
if [ ! -f "$DEER_FLOW_CONFIG_PATH" ]; then
  cat > "$DEER_FLOW_CONFIG_PATH" <<YAML
# DeerFlow config.yaml (database block) for the demo. Delta mode reads every
# thread, full-mode ones included; switch to full and restart the demo to see
# the 409 refusals (the worker still converts: it always freezes delta).
database:
  backend: sqlite
  sqlite_dir: $DASHBOARD_VAR_DIR/data
  checkpoint_channel_mode: delta
  checkpoint_delta:
    snapshot_frequency: 10
YAML
fi
$PY manage.py migrate --noinput -v0
$PY manage.py load_demo_data
echo "----------------------------------------------------------------"
$PY manage.py ensure_demo_admin
echo "config.yaml: $DEER_FLOW_CONFIG_PATH"
echo "----------------------------------------------------------------"
.venv/bin/celery -A dashboard worker --loglevel=INFO --concurrency=1 -Q dashboard \
  --logfile "$DASHBOARD_VAR_DIR/worker.log" &
WORKER=$!
.venv/bin/celery -A dashboard beat --loglevel=INFO --schedule "$DASHBOARD_VAR_DIR/celerybeat-schedule" \
  --logfile "$DASHBOARD_VAR_DIR/beat.log" &
BEAT=$!
WEB=""
stop() {
  trap - EXIT INT TERM
  # SIGTERM: Celery's warm shutdown and the web process's handler mark their registry rows stopped.
  kill -TERM $WEB $WORKER $BEAT 2>/dev/null || true
  wait $WEB $WORKER $BEAT 2>/dev/null || true
}
trap stop EXIT INT TERM
echo "Worker pid $WORKER, log: $DASHBOARD_VAR_DIR/worker.log; beat pid $BEAT, log: $DASHBOARD_VAR_DIR/beat.log"
echo "Open http://127.0.0.1:$PORT/threads/ and log in with the credentials above. Ctrl-C stops the demo."
$PY manage.py runserver "127.0.0.1:$PORT" --noreload &
WEB=$!
wait $WEB
